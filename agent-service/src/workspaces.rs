//! Whose session workspace is whose (table session_workspaces): recorded when a run starts,
//! consulted before a session's files are listed, measured or deleted; and the deletions of
//! sessions' files under way (table session_deletions), so a second one is a conflict on any
//! replica.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::preferences::stmt;

/// The workspace directory of `session_id` under `root`; 400 for an id that is not a plain
/// directory name.
pub fn session_dir(root: &std::path::Path, session_id: &str) -> ApiResult<std::path::PathBuf> {
    if session_id.is_empty()
        || session_id.len() > 128
        || !session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ApiError::bad_request("invalid session_id"));
    }
    Ok(root.join(session_id))
}

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("session workspaces", e)
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

/// The disk of `user_id`'s workspaces other than `session_id`'s (under `root`), watched
/// with a run's against the user's total `quota` (sandbox/quota.rs).
pub async fn user_disk(
    db: &DatabaseConnection,
    root: &std::path::Path,
    user_id: &str,
    session_id: &str,
    quota: u64,
) -> ApiResult<docchat_sandbox::UserDisk> {
    let rows = db
        .query_all(stmt(
            db,
            "SELECT session_id FROM session_workspaces WHERE user_id = ? AND session_id <> ?",
            vec![user_id.into(), session_id.into()],
        ))
        .await
        .map_err(db_error)?;
    let mut others = Vec::with_capacity(rows.len());
    for r in rows {
        let id: String = r.try_get("", "session_id").map_err(db_error)?;
        // A recorded id always was a plain name; one that is not is nobody's directory.
        if let Ok(dir) = session_dir(root, &id) {
            others.push(dir);
        }
    }
    Ok(docchat_sandbox::UserDisk {
        quota: Some(quota),
        others: others.into(),
    })
}

/// The caller's sessions with a workspace, most recently used first: (session_id, preview);
/// with `filter`, only those whose preview contains it (any case).
pub async fn page(
    db: &DatabaseConnection,
    user_id: &str,
    filter: &str,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<(String, String)>> {
    let pattern = format!(
        "%{}%",
        filter
            .trim()
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    let rows = db
        .query_all(stmt(
            db,
            "SELECT session_id, chat_preview FROM session_workspaces WHERE user_id = ? \
             AND LOWER(chat_preview) LIKE ? ESCAPE '\\' \
             ORDER BY updated_at DESC, session_id LIMIT ? OFFSET ?",
            vec![
                user_id.into(),
                pattern.into(),
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

/// Whether the session has a workspace on record.
pub async fn recorded(db: &DatabaseConnection, session_id: &str) -> ApiResult<bool> {
    Ok(db
        .query_one(stmt(
            db,
            "SELECT 1 AS one FROM session_workspaces WHERE session_id = ?",
            vec![session_id.into()],
        ))
        .await
        .map_err(db_error)?
        .is_some())
}

/// Forgets the session's workspace (the session was deleted).
pub async fn forget(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "DELETE FROM session_workspaces WHERE session_id = ?",
        vec![session_id.into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}

/// How long a deletion of a session's files holds the session before another may start
/// (a replica that died mid-deletion does not hold it for ever).
const DELETION_LEASE: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Starts a deletion of the session's files on every replica's behalf (table
/// session_deletions): 409 while another one runs.
pub async fn begin_deletion(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    let now = chrono::Utc::now();
    let done = db
        .execute(stmt(
            db,
            "INSERT INTO session_deletions (session_id, until) VALUES (?, ?) \
             ON CONFLICT (session_id) DO UPDATE SET until = excluded.until \
             WHERE session_deletions.until < ?",
            vec![session_id.into(), (now + DELETION_LEASE).into(), now.into()],
        ))
        .await
        .map_err(db_error)?;
    if done.rows_affected() == 0 {
        return Err(ApiError::conflict(
            "a deletion of this session's files is already in progress",
        ));
    }
    Ok(())
}

/// Ends the session's deletion.
pub async fn end_deletion(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "DELETE FROM session_deletions WHERE session_id = ?",
        vec![session_id.into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}
