//! Which documents of the session's collection a RAG completion reads (the client's tags
//! and document ids); resolved against ingest-service by `retrieval`.

use docchat_common::error::ApiResult;

/// Tags or document ids a completion may name.
const MAX_SCOPE_ITEMS: usize = 1000;
/// A page of a collection's documents, read when only exclusions are given.
pub(super) const SCOPE_PAGE: u64 = 1000;
/// The most documents a scope of exclusions reads (beyond it, the rest are left out).
pub(super) const MAX_SCOPE_DOCUMENTS: u64 = 100_000;

/// Which documents of the session's collection a RAG completion reads: all of them, those
/// the client named, or those its tags choose (`CompletionRequest` include_tags,
/// exclude_tags, document_ids). Resolved once per completion, when first searched.
#[derive(Debug, Default)]
pub(super) struct Scope {
    pub(super) include: Vec<String>,
    pub(super) exclude: Vec<String>,
    pub(super) documents: Vec<String>,
    pub(super) resolved: tokio::sync::OnceCell<Vec<String>>,
}

impl Scope {
    pub(super) fn new(
        include: Vec<String>,
        exclude: Vec<String>,
        documents: Vec<String>,
    ) -> ApiResult<Scope> {
        let clean = |list: Vec<String>, what: &str| -> ApiResult<Vec<String>> {
            let list: Vec<String> = list
                .into_iter()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
            if list.len() > MAX_SCOPE_ITEMS {
                return Err(docchat_common::error::ApiError::bad_request(format!(
                    "at most {MAX_SCOPE_ITEMS} {what}"
                )));
            }
            Ok(list)
        };
        Ok(Scope {
            include: clean(include, "tags to include")?,
            exclude: clean(exclude, "tags to exclude")?,
            documents: clean(documents, "document ids")?,
            resolved: tokio::sync::OnceCell::new(),
        })
    }

    /// Every document: nothing was named.
    pub(super) fn is_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty() && self.documents.is_empty()
    }
}
