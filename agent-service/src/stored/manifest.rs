//! The workspace manifest (table workspace_files): path → the document holding it, with the
//! stored bytes' SHA-256 and size, and the question whose run stored them.

use std::collections::HashMap;

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};

use crate::entities::workspace_files::{self, Column as C};

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
    let rows = workspace_files::Entity::find()
        .filter(C::SessionId.is_in(session_ids.iter().map(String::as_str)))
        .order_by_asc(C::SessionId)
        .order_by_asc(C::Path)
        .all(db)
        .await
        .map_err(db_error)?;
    for r in rows {
        let entry = Entry {
            path: r.path,
            document_id: r.document_id,
            sha256: r.sha256,
            size: r.size,
            question_id: r.question_id,
            stored_at: r.updated_at.timestamp(),
        };
        by_session.entry(r.session_id).or_default().push(entry);
    }
    Ok(by_session)
}

/// Records (or updates) where a file is stored.
pub async fn put(db: &DatabaseConnection, session_id: &str, e: &Entry) -> ApiResult<()> {
    workspace_files::Entity::insert(workspace_files::ActiveModel {
        session_id: Set(session_id.to_owned()),
        path: Set(e.path.clone()),
        document_id: Set(e.document_id.clone()),
        sha256: Set(e.sha256.clone()),
        size: Set(e.size),
        question_id: Set(e.question_id.clone()),
        updated_at: Set(chrono::Utc::now()),
    })
    .on_conflict(
        OnConflict::columns([C::SessionId, C::Path])
            .update_columns([
                C::DocumentId,
                C::Sha256,
                C::Size,
                C::QuestionId,
                C::UpdatedAt,
            ])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Forgets one file (it left the workspace; its document stays).
pub async fn remove(db: &DatabaseConnection, session_id: &str, path: &str) -> ApiResult<()> {
    workspace_files::Entity::delete_by_id((session_id.to_owned(), path.to_owned()))
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Forgets every file of the session.
pub async fn clear(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    workspace_files::Entity::delete_many()
        .filter(C::SessionId.eq(session_id))
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}
