//! The session collection's documents, readable (read-only) in the sandbox: each original
//! file and its extracted text (`<name>.txt`, `--- page N ---` before every page), kept in
//! data_dir/agent/collections/<collection_id> and refreshed before a run from ingest-service
//! with the run's caller's rights (ListDocuments checks them). A document is fetched again
//! only when its `updated_at` changed; documents that left the collection leave the shelf.
//! Files are written beside their place and renamed in, so a run reading the shelf while
//! another refreshes it never sees half a file.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::ingest::v1 as ingest;
use serde::{Deserialize, Serialize};

use crate::stored::MAX_FILE_BYTES;

/// Documents of a collection put on the shelf, at most.
pub const MAX_DOCUMENTS: u64 = 1000;

/// What the shelf holds of one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    updated_at: i64,
    /// The original's file name on the shelf, and its text's (when it parsed).
    file: String,
    text: Option<String>,
}

/// The shelves of one replica.
pub struct Shelf {
    root: PathBuf,
    clients: Clients,
    /// One refresh of a collection at a time.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Shelf {
    pub fn new(root: PathBuf, clients: Clients) -> Shelf {
        Shelf {
            root,
            clients,
            locks: Mutex::default(),
        }
    }

    /// Where the collection's shelf is (it may not exist yet).
    pub fn path(&self, collection_id: &str) -> PathBuf {
        self.root.join(collection_id)
    }

    /// The collection's shelf, up to date, for `caller` (who must be able to read it).
    pub async fn open(&self, caller: &Caller, collection_id: &str) -> ApiResult<PathBuf> {
        if collection_id.is_empty()
            || !collection_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(ApiError::bad_request("invalid collection_id"));
        }
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(collection_id.to_owned())
            .or_default()
            .clone();
        let _held = lock.lock().await;
        let dir = self.root.join(collection_id);
        let docs = self.documents(caller, collection_id).await?;
        create_dir(&self.root)?;
        create_dir(&dir)?;
        let index_path = dir.join(".index.json");
        let mut index: HashMap<String, Held> = std::fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let names = shelf_names(&docs);
        // Documents gone, or changed: their files go first.
        let wanted: HashMap<&str, (&ingest::Document, i64)> = docs
            .iter()
            .map(|d| (d.id.as_str(), (d, updated(d))))
            .collect();
        index.retain(|id, held| {
            let keep = wanted.get(id.as_str()).is_some_and(|(d, at)| {
                *at == held.updated_at && names.get(&d.id) == Some(&held.file)
            }) && dir.join(&held.file).is_file();
            if !keep {
                let _ = std::fs::remove_file(dir.join(&held.file));
                if let Some(t) = &held.text {
                    let _ = std::fs::remove_file(dir.join(t));
                }
            }
            keep
        });
        for d in &docs {
            if index.contains_key(&d.id) || d.size as u64 > MAX_FILE_BYTES {
                continue;
            }
            let Some(file) = names.get(&d.id) else {
                continue;
            };
            match self.fetch(caller, d, &dir, file).await {
                Ok(held) => {
                    index.insert(d.id.clone(), held);
                }
                Err(e) => {
                    tracing::warn!(document = %d.id, error = %e, "not put on the shelf");
                }
            }
        }
        let tmp = dir.join(".index.json.part");
        std::fs::write(&tmp, serde_json::to_vec(&index).unwrap_or_default())
            .and_then(|()| std::fs::rename(&tmp, &index_path))
            .map_err(|e| ApiError::internal("writing the shelf's index", e))?;
        Ok(dir)
    }

    /// The collection's documents (NOT_FOUND when the caller cannot read it).
    async fn documents(
        &self,
        caller: &Caller,
        collection_id: &str,
    ) -> ApiResult<Vec<ingest::Document>> {
        let docs = self
            .clients
            .ingest(caller)
            .list_documents(ingest::ListDocumentsRequest {
                collection_id: Some(collection_id.to_owned()),
                limit: MAX_DOCUMENTS,
                sort_column: "created_at".into(),
                ascending: true,
                ..Default::default()
            })
            .await?
            .into_inner()
            .documents;
        Ok(docs
            .into_iter()
            .filter(|d| d.status == "completed")
            .collect())
    }

    /// Puts one document on the shelf: the original, then its text.
    async fn fetch(
        &self,
        caller: &Caller,
        doc: &ingest::Document,
        dir: &Path,
        file: &str,
    ) -> Result<Held, String> {
        let dest = dir.join(file);
        crate::stored::read_document(&self.clients, caller, &doc.id, &dest)
            .await
            .map_err(|s| s.message().to_owned())?;
        let _ = std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644));
        let text_name = format!("{file}.txt");
        let (src, name) = (dest.clone(), file.to_owned());
        let text = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&src).ok()?;
            docchat_parsers::parse(&name, &bytes)
                .ok()
                .map(|p| paged_text(&p))
        })
        .await
        .ok()
        .flatten();
        let text = match text {
            Some(t) => {
                let path = dir.join(&text_name);
                let tmp = dir.join(format!(".{text_name}.part"));
                std::fs::write(&tmp, t)
                    .and_then(|()| {
                        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
                    })
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| e.to_string())?;
                Some(text_name)
            }
            None => None,
        };
        Ok(Held {
            updated_at: updated(doc),
            file: file.to_owned(),
            text,
        })
    }
}

fn create_dir(dir: &Path) -> ApiResult<()> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| ApiError::internal("preparing the documents' shelf", e))
}

fn updated(d: &ingest::Document) -> i64 {
    d.updated_at.as_ref().map_or(0, |t| {
        t.seconds.saturating_mul(1_000_000_000) + i64::from(t.nanos)
    })
}

/// The text of a parsed document with a `--- page N ---` line before every page.
pub fn paged_text(doc: &docchat_parsers::ParsedDocument) -> String {
    let mut out = String::new();
    for page in &doc.pages {
        out.push_str(&format!("--- page {} ---\n", page.number));
        for block in &page.blocks {
            out.push_str(&block.text);
            out.push_str("\n\n");
        }
    }
    out
}

/// A file name per document: its name made safe (no `/`, no leading `.`), the id's start
/// added where two documents share a name.
fn shelf_names(docs: &[ingest::Document]) -> HashMap<String, String> {
    let safe = |name: &str| -> String {
        let base: String = name
            .rsplit('/')
            .next()
            .unwrap_or("")
            .chars()
            .map(|c| if c.is_control() || c == '\\' { '_' } else { c })
            .collect();
        let base = base.trim_start_matches('.').trim().to_owned();
        if base.is_empty() {
            "document".into()
        } else {
            base.chars().take(200).collect()
        }
    };
    let mut count: HashMap<String, usize> = HashMap::new();
    for d in docs {
        *count.entry(safe(&d.name)).or_default() += 1;
    }
    docs.iter()
        .map(|d| {
            let name = safe(&d.name);
            let unique = if count.get(&name).copied().unwrap_or(0) > 1 {
                let short: String = d.id.chars().take(8).collect();
                match name.rsplit_once('.') {
                    Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{short}.{ext}"),
                    _ => format!("{name}-{short}"),
                }
            } else {
                name
            };
            (d.id.clone(), unique)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, name: &str) -> ingest::Document {
        ingest::Document {
            id: id.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_safe_and_unique() {
        let names = shelf_names(&[
            doc("aaaaaaaa-1", "report.pdf"),
            doc("bbbbbbbb-2", "report.pdf"),
            doc("cccccccc-3", "../../etc/passwd"),
            doc("dddddddd-4", ".hidden"),
        ]);
        assert_eq!(names["aaaaaaaa-1"], "report-aaaaaaaa.pdf");
        assert_eq!(names["bbbbbbbb-2"], "report-bbbbbbbb.pdf");
        assert_eq!(names["cccccccc-3"], "passwd");
        assert_eq!(names["dddddddd-4"], "hidden");
    }
}
