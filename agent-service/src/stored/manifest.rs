//! The workspace manifest (table workspace_files): path → the document holding it, with the
//! stored bytes' SHA-256 and size, and the question whose run stored them.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::preferences::stmt;

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::internal("workspace files", e)
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

/// The session's stored files, by path.
pub async fn entries(db: &DatabaseConnection, session_id: &str) -> ApiResult<Vec<Entry>> {
    let rows = db
        .query_all(stmt(
            db,
            "SELECT path, document_id, sha256, size, question_id, updated_at FROM workspace_files \
             WHERE session_id = ? ORDER BY path",
            vec![session_id.into()],
        ))
        .await
        .map_err(db_error)?;
    rows.into_iter()
        .map(|r| {
            Ok(Entry {
                path: r.try_get("", "path").map_err(db_error)?,
                document_id: r.try_get("", "document_id").map_err(db_error)?,
                sha256: r.try_get("", "sha256").map_err(db_error)?,
                size: r.try_get("", "size").map_err(db_error)?,
                question_id: r.try_get("", "question_id").map_err(db_error)?,
                stored_at: r
                    .try_get::<chrono::DateTime<chrono::Utc>>("", "updated_at")
                    .map_err(db_error)?
                    .timestamp(),
            })
        })
        .collect()
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
