//! Whose session workspace is whose (table session_workspaces): recorded when a run starts,
//! consulted before a session's files are listed, measured or deleted.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::preferences::stmt;

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::internal("session workspaces", e)
}

/// Records that `user_id`'s session has a workspace (its preview refreshed). A session
/// recorded for another user keeps its owner.
pub async fn record(
    db: &DatabaseConnection,
    session_id: &str,
    user_id: &str,
    preview: &str,
) -> ApiResult<()> {
    let now = chrono::Utc::now();
    let preview: String = preview.chars().take(200).collect();
    db.execute(stmt(
        db,
        "INSERT INTO session_workspaces (session_id, user_id, chat_preview, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET \
         chat_preview = excluded.chat_preview, updated_at = excluded.updated_at \
         WHERE session_workspaces.user_id = excluded.user_id",
        vec![
            session_id.into(),
            user_id.into(),
            preview.into(),
            now.into(),
            now.into(),
        ],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Whether the session's workspace is the caller's: `Ok(true)` when it is, `Ok(false)` when
/// the session has none recorded (nothing to show), 404 when it is another user's.
pub async fn owned(db: &DatabaseConnection, session_id: &str, user_id: &str) -> ApiResult<bool> {
    let row = db
        .query_one(stmt(
            db,
            "SELECT user_id FROM session_workspaces WHERE session_id = ?",
            vec![session_id.into()],
        ))
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(false) };
    let owner: String = row.try_get("", "user_id").map_err(db_error)?;
    if owner == user_id {
        Ok(true)
    } else {
        Err(ApiError::not_found(format!(
            "session {session_id} not found"
        )))
    }
}

/// The caller's sessions with a workspace, most recently used first: (session_id, preview).
pub async fn page(
    db: &DatabaseConnection,
    user_id: &str,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<(String, String)>> {
    let rows = db
        .query_all(stmt(
            db,
            "SELECT session_id, chat_preview FROM session_workspaces WHERE user_id = ? \
             ORDER BY updated_at DESC, session_id LIMIT ? OFFSET ?",
            vec![
                user_id.into(),
                (limit as i64).into(),
                (offset as i64).into(),
            ],
        ))
        .await
        .map_err(db_error)?;
    rows.into_iter()
        .map(|r| {
            Ok((
                r.try_get("", "session_id").map_err(db_error)?,
                r.try_get("", "chat_preview").map_err(db_error)?,
            ))
        })
        .collect()
}
