//! Whose session workspace is whose (table session_workspaces): recorded when a run starts,
//! consulted before a session's files are listed, measured or deleted; and the deletions of
//! sessions' files under way (table session_deletions), so a second one is a conflict on any
//! replica.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::sea_query::{Alias, Expr, Func, LikeExpr, OnConflict};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::entities::Owned;
use crate::entities::{session_deletions, session_workspaces};

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
    use session_workspaces::Column as C;
    let now = chrono::Utc::now();
    let preview: String = preview.chars().take(200).collect();
    session_workspaces::Entity::insert(session_workspaces::ActiveModel {
        session_id: Set(session_id.to_owned()),
        user_id: Set(user_id.to_owned()),
        chat_preview: Set(preview),
        created_at: Set(now),
        updated_at: Set(now),
    })
    .on_conflict(
        OnConflict::column(C::SessionId)
            .update_columns([C::ChatPreview, C::UpdatedAt])
            .action_and_where(
                Expr::col((session_workspaces::Entity, C::UserId))
                    .equals((Alias::new("excluded"), C::UserId)),
            )
            .to_owned(),
    )
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Whether the session's workspace is the caller's: `Ok(true)` when it is, `Ok(false)` when
/// the session has none recorded (nothing to show), 404 when it is another user's.
pub async fn owned(db: &DatabaseConnection, session_id: &str, user_id: &str) -> ApiResult<bool> {
    let Some(owner) = session_workspaces::Entity::find_by_id(session_id)
        .select_only()
        .column(session_workspaces::Column::UserId)
        .into_tuple::<String>()
        .one(db)
        .await
        .map_err(db_error)?
    else {
        return Ok(false);
    };
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
    let ids = session_workspaces::Entity::find_by_owner(user_id)
        .filter(session_workspaces::Column::SessionId.ne(session_id))
        .select_only()
        .column(session_workspaces::Column::SessionId)
        .into_tuple::<String>()
        .all(db)
        .await
        .map_err(db_error)?;
    let mut others = Vec::with_capacity(ids.len());
    for id in ids {
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
    use session_workspaces::Column as C;
    let pattern = format!(
        "%{}%",
        filter
            .trim()
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    session_workspaces::Entity::find_by_owner(user_id)
        .filter(
            Expr::expr(Func::lower(Expr::col(C::ChatPreview)))
                .like(LikeExpr::new(pattern).escape('\\')),
        )
        .order_by_desc(C::UpdatedAt)
        .order_by_asc(C::SessionId)
        .limit(limit)
        .offset(offset)
        .select_only()
        .columns([C::SessionId, C::ChatPreview])
        .into_tuple::<(String, String)>()
        .all(db)
        .await
        .map_err(db_error)
}

/// Whether the session has a workspace on record.
pub async fn recorded(db: &DatabaseConnection, session_id: &str) -> ApiResult<bool> {
    Ok(session_workspaces::Entity::find_by_id(session_id)
        .select_only()
        .column(session_workspaces::Column::SessionId)
        .into_tuple::<String>()
        .one(db)
        .await
        .map_err(db_error)?
        .is_some())
}

/// Forgets the session's workspace (the session was deleted).
pub async fn forget(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    session_workspaces::Entity::delete_by_id(session_id)
        .exec(db)
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
    use session_deletions::Column as C;
    let now = chrono::Utc::now();
    let done = session_deletions::Entity::insert(session_deletions::ActiveModel {
        session_id: Set(session_id.to_owned()),
        until: Set(now + DELETION_LEASE),
    })
    .on_conflict(
        OnConflict::column(C::SessionId)
            .update_column(C::Until)
            .action_and_where(Expr::col((session_deletions::Entity, C::Until)).lt(now))
            .to_owned(),
    )
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    if done == 0 {
        return Err(ApiError::conflict(
            "a deletion of this session's files is already in progress",
        ));
    }
    Ok(())
}

/// Ends the session's deletion.
pub async fn end_deletion(db: &DatabaseConnection, session_id: &str) -> ApiResult<()> {
    session_deletions::Entity::delete_by_id(session_id)
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}
