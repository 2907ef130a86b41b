//! Agent files as documents. A file an agent writes in a chat session's workspace becomes a
//! document of the session's owner: no collection (`collection_id` is empty),
//! `chat_session_id` set, named by its workspace path, its kind from the extension, its
//! bytes an `uploads` row and blob like an upload's (`documents.upload_id`). A file written
//! again keeps its document and gets new bytes. New agent documents count against
//! agents_document_limit_per_user (documents without a session against
//! document_limit_per_user, see `ingestion`). Any document's stored file — an agent file,
//! or the uploaded original of a collection document — streams back to a reader; a
//! session's documents are deleted with their bytes.

use docchat_common::Caller;
use docchat_common::bus::{envelope, topics};
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::settings::SettingsClient;
use docchat_common::time::now;
use docchat_common::{db, outbox};
use docchat_proto::events::v1::DocumentChanged;
use docchat_proto::ingest::v1::agent_file_chunk::Part;
use docchat_proto::ingest::v1::{AgentFileChunk, AgentFileMeta};
use futures::{Stream, StreamExt};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QuerySelect, Set,
};

use crate::blobs::BlobStore;
use crate::documents;
use crate::entities::{documents as rows, uploads};
use crate::uploads::{self as received, Received};

/// The runtime setting new agent documents count against.
pub const LIMIT_SETTING: &str = "agents_document_limit_per_user";
/// The most bytes one message carries when a document's file is read back.
pub const PIECE_BYTES: usize = 64 * 1024;
/// The longest workspace path a document takes as its name (the column's size).
pub const MAX_PATH_CHARS: usize = 1024;

/// What agent files need of the service.
pub struct AgentFiles<'a> {
    pub db: &'a DatabaseConnection,
    pub blobs: &'a BlobStore,
    pub settings: &'a SettingsClient,
    /// The largest file stored (the service's upload limit).
    pub max_bytes: u64,
}

/// A checked file of a session: its session id (normalized) and workspace path.
struct SessionFile {
    session: String,
    path: String,
}

/// A workspace path as a document name: `/`-separated and relative, without empty, `.` or
/// `..` segments or control characters, at most [`MAX_PATH_CHARS`] characters.
pub fn check_path(path: &str) -> ApiResult<()> {
    let refuse = |why: &str| Err(ApiError::bad_request(format!("invalid path: {why}")));
    if path.is_empty() {
        return refuse("it is empty");
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return refuse("it is longer than 1024 characters");
    }
    if path.starts_with('/') {
        return refuse("it must be relative to the session's workspace");
    }
    if path.chars().any(char::is_control) {
        return refuse("it contains control characters");
    }
    for segment in path.split('/') {
        match segment {
            "" => return refuse("it has an empty segment"),
            "." | ".." => return refuse("it may not contain . or .. segments"),
            _ => {}
        }
    }
    Ok(())
}

/// A document's `type` from its name: the parsers' kind for an extension they read (as
/// ingestion names it; an image is its extension, `png`, `jpg`, ...), else the extension
/// itself, else `file`.
pub fn kind_of(path: &str) -> String {
    if let Some(kind) = docchat_parsers::kind_by_extension(path)
        && kind != docchat_parsers::DocumentKind::Image
    {
        return kind.as_str().to_owned();
    }
    match docchat_parsers::extension(path) {
        Some(ext) if ext.len() <= 16 && ext.chars().all(|c| c.is_ascii_alphanumeric()) => ext,
        _ => "file".to_owned(),
    }
}

/// The refusal past agents_document_limit_per_user (429, SPEC.md's "request rejected").
fn limit_reached(limit: i64) -> ApiError {
    ApiError::new(
        ErrorCode::TooManyRequests,
        format!(
            "request rejected: agent document limit reached ({limit}); delete documents of \
             earlier chat sessions or ask an administrator to raise {LIMIT_SETTING}"
        ),
    )
}

/// The caller's document `id` of `session`, locked for the transaction on PostgreSQL;
/// anything else is 404.
async fn session_document<C: ConnectionTrait>(
    conn: &C,
    caller: &Caller,
    session: &str,
    id: &str,
) -> ApiResult<rows::Model> {
    rows::Entity::find_by_id(id.to_owned())
        .filter(rows::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(rows::Column::ChatSessionId.eq(session))
        .lock_exclusive()
        .one(conn)
        .await?
        .ok_or_else(|| documents::not_found(id))
}

/// The owner's agent documents (those with a chat session).
async fn agent_documents<C: ConnectionTrait>(conn: &C, owner: &str) -> ApiResult<i64> {
    let n = rows::Entity::find()
        .filter(rows::Column::OwnerId.eq(owner))
        .filter(rows::Column::ChatSessionId.is_not_null())
        .count(conn)
        .await?;
    Ok(i64::try_from(n).unwrap_or(i64::MAX))
}

impl AgentFiles<'_> {
    /// Stores a file of a session from its stream (metadata first, then the bytes): a new
    /// document, or, with `document_id`, that document's bytes replaced.
    pub async fn put<S>(&self, caller: &Caller, mut stream: S) -> ApiResult<rows::Model>
    where
        S: Stream<Item = Result<AgentFileChunk, tonic::Status>> + Unpin,
    {
        let AgentFileMeta {
            chat_session_id,
            path,
            document_id,
        } = match stream.next().await {
            Some(Ok(AgentFileChunk {
                part: Some(Part::Meta(meta)),
            })) => meta,
            Some(Err(status)) => return Err(status.into()),
            _ => {
                return Err(ApiError::bad_request(
                    "an agent file starts with its metadata",
                ));
            }
        };
        let file = SessionFile {
            session: documents::session_id(&chat_session_id)?,
            path,
        };
        check_path(&file.path)?;
        let replacing = (!document_id.is_empty()).then_some(document_id);
        let limit = match &replacing {
            // Checked again in the transaction; here so that a wrong id costs no bytes.
            Some(id) => {
                session_document(self.db, caller, &file.session, id).await?;
                None
            }
            None => self.settings.resolve(caller).await?.limit(LIMIT_SETTING),
        };
        let pieces = stream.map(|message| match message?.part {
            Some(Part::Data(bytes)) => Ok(bytes),
            Some(Part::Meta(_)) => Err(ApiError::bad_request("metadata sent twice")),
            None => Ok(Vec::new()),
        });
        let blob = received::write_blob(self.blobs, pieces, self.max_bytes).await?;
        let stored = match &replacing {
            None => self
                .create(caller, &file, &blob, limit)
                .await
                .map(|d| (d, None)),
            Some(id) => self.replace(caller, &file, id, &blob).await,
        };
        match stored {
            Ok((doc, old_blob)) => {
                if let Some(old) = old_blob {
                    self.forget_blob(&old).await;
                }
                Ok(doc)
            }
            Err(e) => {
                self.forget_blob(&blob.id).await;
                Err(e)
            }
        }
    }

    /// A new agent document; past the limit nothing is kept. The row is written before the
    /// count, in one transaction (see `ingestion::start_many`).
    async fn create(
        &self,
        caller: &Caller,
        file: &SessionFile,
        blob: &Received,
        limit: Option<i64>,
    ) -> ApiResult<rows::Model> {
        let txn = docchat_common::db::begin(self.db).await?;
        if limit.is_some() {
            db::serialize_on(&txn, &format!("ingest.agent-documents:{}", caller.user_id)).await?;
        }
        received::row(caller, file.path.clone(), blob)
            .insert(&txn)
            .await?;
        let at = now();
        let doc = rows::ActiveModel {
            id: Set(docchat_common::ids::new_id()),
            owner_id: Set(caller.user_id.clone()),
            owner_username: Set(caller.username.clone()),
            collection_id: Set(String::new()),
            name: Set(file.path.clone()),
            kind: Set(kind_of(&file.path)),
            size: Set(blob.size),
            page_count: Set(0),
            status: Set("completed".to_owned()),
            upload_id: Set(Some(blob.id.clone())),
            chat_session_id: Set(Some(file.session.clone())),
            summary: Set(None),
            questions: Set(None),
            segments: Set(None),
            page_sources: Set(None),
            message: Set(None),
            metadata: Set(None),
            uri: Set(None),
            created_at: Set(at),
            updated_at: Set(at),
        }
        .insert(&txn)
        .await?;
        if let Some(limit) = limit
            && agent_documents(&txn, &caller.user_id).await? > limit
        {
            txn.rollback().await?;
            return Err(limit_reached(limit));
        }
        let event = envelope(
            topics::INGEST_DOCUMENT_CREATED,
            &caller.user_id,
            &DocumentChanged {
                document_id: doc.id.clone(),
                collection_id: String::new(),
                user_id: caller.user_id.clone(),
            },
        );
        outbox::enqueue(&txn, &event).await?;
        txn.commit().await?;
        Ok(doc)
    }

    /// New bytes for the caller's document `id` of the file's session: the document and the
    /// blob it no longer uses (removed by the caller after the commit).
    async fn replace(
        &self,
        caller: &Caller,
        file: &SessionFile,
        id: &str,
        blob: &Received,
    ) -> ApiResult<(rows::Model, Option<String>)> {
        let txn = docchat_common::db::begin(self.db).await?;
        let doc = session_document(&txn, caller, &file.session, id).await?;
        received::row(caller, file.path.clone(), blob)
            .insert(&txn)
            .await?;
        let old = doc.upload_id.clone();
        let mut changed: rows::ActiveModel = doc.into();
        changed.name = Set(file.path.clone());
        changed.kind = Set(kind_of(&file.path));
        changed.size = Set(blob.size);
        changed.upload_id = Set(Some(blob.id.clone()));
        changed.updated_at = Set(now());
        let doc = changed.update(&txn).await?;
        if let Some(old) = &old {
            uploads::Entity::delete_many()
                .filter(uploads::Column::Id.eq(old.clone()))
                .filter(uploads::Column::OwnerId.eq(caller.user_id.clone()))
                .exec(&txn)
                .await?;
        }
        txn.commit().await?;
        Ok((doc, old))
    }

    /// A document and its stored file, as pieces of [`PIECE_BYTES`], for a caller who may
    /// read it (with `owned_only`, who owns it). Unknown, not readable, and without a
    /// stored file are all 404.
    pub async fn read(
        &self,
        caller: &Caller,
        id: &str,
        owned_only: bool,
    ) -> ApiResult<(
        rows::Model,
        impl Stream<Item = ApiResult<Vec<u8>>> + Send + 'static + use<>,
    )> {
        let doc = if owned_only {
            rows::Entity::find_by_id(id.to_owned())
                .filter(rows::Column::OwnerId.eq(caller.user_id.clone()))
                .one(self.db)
                .await?
                .ok_or_else(|| documents::not_found(id))?
        } else {
            documents::get(self.db, caller, id).await?
        };
        let no_file = || ApiError::not_found(format!("document {id} has no stored file"));
        let upload = doc.upload_id.clone().ok_or_else(no_file)?;
        let bytes = self
            .blobs
            .stream(&upload, PIECE_BYTES)
            .await
            .map_err(|e| match e.code {
                ErrorCode::NotFound => no_file(),
                _ => e,
            })?;
        Ok((doc, bytes))
    }

    /// Deletes the caller's documents of a chat session (each as DELETE /documents/{id}
    /// does: chunks, tags, `ingest.document.deleted`), then their bytes; answers how many.
    pub async fn delete_session(&self, caller: &Caller, chat_session_id: &str) -> ApiResult<u64> {
        let session = documents::session_id(chat_session_id)?;
        let ids: Vec<String> = rows::Entity::find()
            .select_only()
            .column(rows::Column::Id)
            .filter(rows::Column::OwnerId.eq(caller.user_id.clone()))
            .filter(rows::Column::ChatSessionId.eq(session))
            .into_tuple()
            .all(self.db)
            .await?;
        let mut deleted = 0;
        for id in ids {
            match documents::delete(self.db, caller, &id).await {
                Ok(doc) => {
                    deleted += 1;
                    self.drop_bytes(caller, &doc).await;
                }
                // Deleted meanwhile by another call.
                Err(e) if e.code == ErrorCode::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// After an agent document was deleted: its upload row and blob, which no other
    /// document uses (an uploaded file may have become documents of several collections,
    /// so a collection document's bytes stay). The document is gone either way: a failure
    /// here leaves an orphan, logged, not the caller's error.
    pub async fn drop_bytes(&self, caller: &Caller, doc: &rows::Model) {
        let (Some(_), Some(upload)) = (&doc.chat_session_id, &doc.upload_id) else {
            return;
        };
        let removed = uploads::Entity::delete_many()
            .filter(uploads::Column::Id.eq(upload.clone()))
            .filter(uploads::Column::OwnerId.eq(caller.user_id.clone()))
            .exec(self.db)
            .await;
        if let Err(e) = removed {
            tracing::warn!(upload_id = %upload, error = %e, "could not remove a deleted agent document's upload");
        }
        self.forget_blob(upload).await;
    }

    /// Removes a blob nothing refers to any more; a failure leaves an orphan file behind,
    /// which is logged, not the caller's error.
    async fn forget_blob(&self, id: &str) {
        if let Err(e) = self.blobs.delete(id).await {
            tracing::warn!(blob_id = id, error = %e.message, "could not remove an unused blob");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_path, kind_of};

    #[test]
    fn workspace_paths_are_relative_and_plain() {
        for good in [
            "a.txt",
            "out/chart.png",
            "deep/er/still ok.md",
            "ü/名前.csv",
        ] {
            assert!(check_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a/./b",
            ".",
            "a//b",
            "dir/",
            "a\nb",
            "tab\there",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path(&"x".repeat(1024)).is_ok());
        assert!(check_path(&"x".repeat(1025)).is_err());
    }

    #[test]
    fn kinds_come_from_the_extension() {
        assert_eq!(kind_of("notes/plan.md"), "markdown");
        assert_eq!(kind_of("data.CSV"), "csv");
        assert_eq!(kind_of("chart.png"), "png");
        assert_eq!(kind_of("Makefile"), "file");
        assert_eq!(kind_of("weird.a-b"), "file");
    }
}
