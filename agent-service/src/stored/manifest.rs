//! The workspace manifest (table workspace_files): path → the document holding it, with the
//! stored bytes' SHA-256 and size, and the question whose run stored them.

use std::collections::HashMap;

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::preferences::stmt;

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("workspace files", e)
}

/// One stored file of a session's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub document_id: String,
    pub sha256: String,
    pub size: i64,
    /// The question whose run stored this version.
    pub question_id: String,
    /// When this version was stored, Unix seconds.
    pub stored_at: i64,
}

impl From<Entry> for crate::files::StoredFile {
    fn from(e: Entry) -> Self {
        crate::files::StoredFile {
            path: e.path,
            size: e.size,
            stored_at: e.stored_at,
        }
    }
}

/// The session's stored files, by path.
pub async fn entries(db: &DatabaseConnection, session_id: &str) -> ApiResult<Vec<Entry>> {
    Ok(entries_of(db, &[session_id.to_owned()])
        .await?
        .remove(session_id)
        .unwrap_or_default())
}

/// The stored files of several sessions in one query, by session (sessions without any are
/// left out), each list by path.
pub async fn entries_of(
    db: &DatabaseConnection,
    session_ids: &[String],
) -> ApiResult<HashMap<String, Vec<Entry>>> {
    let mut by_session: HashMap<String, Vec<Entry>> = HashMap::new();
    if session_ids.is_empty() {
        return Ok(by_session);
    }
    let marks = vec!["?"; session_ids.len()].join(", ");
    let rows = db
        .query_all(stmt(
            db,
            &format!(
                "SELECT session_id, path, document_id, sha256, size, question_id, updated_at \
                 FROM workspace_files WHERE session_id IN ({marks}) ORDER BY session_id, path"
            ),
            session_ids.iter().map(|id| id.clone().into()).collect(),
        ))
        .await
        .map_err(db_error)?;
    for r in rows {
        let session_id: String = r.try_get("", "session_id").map_err(db_error)?;
        let entry = Entry {
            path: r.try_get("", "path").map_err(db_error)?,
            document_id: r.try_get("", "document_id").map_err(db_error)?,
            sha256: r.try_get("", "sha256").map_err(db_error)?,
            size: r.try_get("", "size").map_err(db_error)?,
            question_id: r.try_get("", "question_id").map_err(db_error)?,
            stored_at: r
                .try_get::<chrono::DateTime<chrono::Utc>>("", "updated_at")
                .map_err(db_error)?
                .timestamp(),
        };
        by_session.entry(session_id).or_default().push(entry);
    }
    Ok(by_session)
}

/// Records (or updates) where a file is stored.
pub async fn put(db: &DatabaseConnection, session_id: &str, e: &Entry) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "INSERT INTO workspace_files (session_id, path, document_id, sha256, size, question_id, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, path) DO UPDATE SET \
         document_id = excluded.document_id, sha256 = excluded.sha256, size = excluded.size, \
         question_id = excluded.question_id, updated_at = excluded.updated_at",
        vec![
            session_id.into(),
            e.path.clone().into(),
            e.document_id.clone().into(),
            e.sha256.clone().into(),
            e.size.into(),
            e.question_id.clone().into(),
            chrono::Utc::now().into(),
        ],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Forgets one file (it left the workspace; its document stays).
pub async fn remove(db: &DatabaseConnection, session_id: &str, path: &str) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "DELETE FROM workspace_files WHERE session_id = ? AND path = ?",
        vec![session_id.into(), path.into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Forgets every file of the session.
pub async fn clear(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "DELETE FROM workspace_files WHERE session_id = ?",
        vec![session_id.into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}
