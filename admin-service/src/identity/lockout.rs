//! The guard against lock-outs: no change may leave the caller, or every administrator,
//! without a usable API key.

use chrono::{DateTime, Duration, Utc};
use docchat_common::error::ApiResult;
use docchat_common::time::now;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use super::ADMIN_ROLE;
use super::roles::role_by_name;
use crate::entities::{api_keys, user_roles};

/// Serializes the changes that could leave no administrator able to sign in (PostgreSQL;
/// on SQLite they write before they check).
pub(super) const SIGN_IN_LOCK: &str = "admin.sign-in";

/// How long a key must still live to count as a way back in: a key that expires within the
/// hour is no spare for the one being deleted (the admin would be locked out soon after).
const USABLE_FOR: Duration = Duration::hours(1);

/// Whether a key works at `at`: active, not expired, and (with an inactivity interval) used
/// or created within that many days of `at`.
pub fn key_works_at(
    is_active: bool,
    expires_at: Option<DateTime<Utc>>,
    inactivity_days: Option<i32>,
    last_seen: DateTime<Utc>,
    at: DateTime<Utc>,
) -> bool {
    is_active
        && expires_at.is_none_or(|e| e > at)
        && inactivity_days.is_none_or(|days| last_seen + Duration::days(i64::from(days)) > at)
}

/// Keys of `user_id` that work now and for at least [`USABLE_FOR`]: active, not expiring
/// soon, not about to lapse for inactivity.
pub(super) async fn usable_keys<C: ConnectionTrait>(db: &C, user_id: &str) -> ApiResult<u64> {
    let until = now() + USABLE_FOR;
    let keys = api_keys::Entity::find()
        .filter(api_keys::Column::UserId.eq(user_id))
        .filter(api_keys::Column::IsActive.eq(true))
        .all(db)
        .await?;
    Ok(keys
        .iter()
        .filter(|k| {
            key_works_at(
                k.is_active,
                k.expires_at,
                k.inactivity_days,
                k.last_used_at.unwrap_or(k.created_at),
                until,
            )
        })
        .count() as u64)
}

/// Whether some administrator still holds a usable key: without one, nobody can manage
/// users, keys or settings until a restart brings the bootstrap key back.
pub(super) async fn an_administrator_can_sign_in<C: ConnectionTrait>(db: &C) -> ApiResult<bool> {
    let Some(admin) = role_by_name(db, ADMIN_ROLE).await? else {
        return Ok(false);
    };
    let admins: Vec<String> = user_roles::Entity::find()
        .filter(user_roles::Column::RoleId.eq(admin.id))
        .all(db)
        .await?
        .into_iter()
        .map(|m| m.user_id)
        .collect();
    for user_id in admins {
        if usable_keys(db, &user_id).await? > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}
