//! API keys: their secrets and hints, expiry intervals, resolving a key to its identity,
//! creating, listing and deleting keys.

use chrono::{DateTime, Duration, Utc};
use docchat_common::Caller;
use docchat_common::db;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use rand::Rng;
use rand::distr::Alphanumeric;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use sha2::{Digest, Sha256};

use super::lockout::{SIGN_IN_LOCK, an_administrator_can_sign_in, key_works_at, usable_keys};
use super::new_id;
use super::users::{Identity, find_user, identity_of};
use crate::entities::{api_keys, users};

pub(super) fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

pub(super) fn new_secret() -> String {
    let body: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(48)
        .map(char::from)
        .collect();
    format!("sk-{body}")
}

fn hint(secret: &str) -> String {
    let tail: String = secret
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("sk-...{tail}")
}

/// The longest interval a key may be given (100 years).
const MAX_INTERVAL_SECONDS: i64 = 100 * 365 * 86_400;

/// Parses an expiry interval such as `30 days`, `12h`, `1 week`.
fn parse_interval(text: &str) -> ApiResult<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid interval {text:?}")))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches('s');
    let seconds_per: i64 = match unit {
        "s" | "sec" | "second" => 1,
        "m" | "min" | "minute" => 60,
        "h" | "hour" => 3_600,
        "d" | "day" => 86_400,
        "w" | "week" => 7 * 86_400,
        "month" => 30 * 86_400,
        "y" | "year" => 365 * 86_400,
        _ => {
            return Err(ApiError::bad_request(format!(
                "invalid interval {text:?}: use a number and seconds, minutes, hours, days, weeks, months or years"
            )));
        }
    };
    if n <= 0 {
        return Err(ApiError::bad_request("the interval must be positive"));
    }
    // Checked: "9223372036854775807 seconds" or "300000 years" would overflow the clock.
    match n.checked_mul(seconds_per) {
        Some(secs) if secs <= MAX_INTERVAL_SECONDS => Ok(Duration::seconds(secs)),
        _ => Err(ApiError::bad_request(format!(
            "invalid interval {text:?}: at most 100 years"
        ))),
    }
}

pub(super) async fn insert_key<C: ConnectionTrait>(
    db: &C,
    user_id: &str,
    name: &str,
    secret: &str,
    expires_at: Option<DateTime<Utc>>,
) -> ApiResult<api_keys::Model> {
    Ok(api_keys::ActiveModel {
        id: Set(new_id()),
        user_id: Set(user_id.to_owned()),
        name: Set(name.to_owned()),
        key_hash: Set(hash_key(secret)),
        hint: Set(hint(secret)),
        created_at: Set(now()),
        expires_at: Set(expires_at),
        last_used_at: Set(None),
        total_calls: Set(0),
        is_active: Set(true),
        inactivity_days: Set(None),
    }
    .insert(db)
    .await?)
}

/// Resolves a secret key; `None` for unknown, inactive or expired keys.
pub async fn authenticate(db: &DatabaseConnection, secret: &str) -> ApiResult<Option<Identity>> {
    let Some(key) = api_keys::Entity::find()
        .filter(api_keys::Column::KeyHash.eq(hash_key(secret)))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let at = now();
    if !key_works_at(
        key.is_active,
        key.expires_at,
        key.inactivity_days,
        key.last_used_at.unwrap_or(key.created_at),
        at,
    ) {
        return Ok(None);
    }
    let Some(user) = users::Entity::find_by_id(key.user_id.clone())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    api_keys::Entity::update_many()
        .col_expr(
            api_keys::Column::TotalCalls,
            sea_orm::sea_query::Expr::col(api_keys::Column::TotalCalls).add(1),
        )
        .col_expr(
            api_keys::Column::LastUsedAt,
            sea_orm::sea_query::Expr::value(at),
        )
        .filter(api_keys::Column::Id.eq(key.id.clone()))
        .exec(db)
        .await?;
    let mut identity = identity_of(db, user, key.id).await?;
    identity.key_expires_at = key.expires_at;
    Ok(Some(identity))
}

pub async fn create_key(
    db: &DatabaseConnection,
    user_id: &str,
    name: &str,
    expires_in: &str,
) -> ApiResult<(String, api_keys::Model, users::Model)> {
    let user = find_user(db, user_id).await?;
    let expires_at = if expires_in.trim().is_empty() {
        None
    } else {
        Some(now() + parse_interval(expires_in)?)
    };
    if name.chars().count() > 255 {
        return Err(ApiError::bad_request("name must be at most 255 characters"));
    }
    let name = if name.trim().is_empty() {
        "api key"
    } else {
        name.trim()
    };
    let secret = new_secret();
    let key = insert_key(db, &user.id, name, &secret, expires_at).await?;
    Ok((secret, key, user))
}

pub async fn list_keys(
    db: &DatabaseConnection,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<(api_keys::Model, String)>> {
    let keys = api_keys::Entity::find()
        .order_by_desc(api_keys::Column::CreatedAt)
        .order_by_asc(api_keys::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(db)
        .await?;
    let user_ids: Vec<String> = keys.iter().map(|k| k.user_id.clone()).collect();
    let names: std::collections::HashMap<String, String> = users::Entity::find()
        .filter(users::Column::Id.is_in(user_ids))
        .all(db)
        .await?
        .into_iter()
        .map(|u| (u.id, u.username))
        .collect();
    Ok(keys
        .into_iter()
        .map(|k| {
            let username = names.get(&k.user_id).cloned().unwrap_or_default();
            (k, username)
        })
        .collect())
}

/// The most days an inactivity interval may be (100 years).
const MAX_INACTIVITY_DAYS: i32 = 36_500;

/// What [`update_key`] changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChange {
    /// For good: a deactivated key is never active again.
    Deactivate,
    /// Expires this long from now; `None` removes the expiry.
    ExpiresIn(Option<String>),
    /// Stops working after this many days without a call; `None` removes the interval.
    InactivityDays(Option<i32>),
}

/// Changes a key's life (any user's: administrators), unless the change leaves the caller,
/// or every administrator, without a usable key (409), as [`delete_key`] refuses.
pub async fn update_key(
    db: &DatabaseConnection,
    caller: &Caller,
    key_id: &str,
    change: KeyChange,
) -> ApiResult<()> {
    let mut update = api_keys::ActiveModel {
        id: Set(key_id.to_owned()),
        ..Default::default()
    };
    match change {
        KeyChange::Deactivate => update.is_active = Set(false),
        KeyChange::ExpiresIn(None) => update.expires_at = Set(None),
        KeyChange::ExpiresIn(Some(text)) => {
            update.expires_at = Set(Some(now() + parse_interval(&text)?));
        }
        KeyChange::InactivityDays(None) => update.inactivity_days = Set(None),
        KeyChange::InactivityDays(Some(days)) if (1..=MAX_INACTIVITY_DAYS).contains(&days) => {
            update.inactivity_days = Set(Some(days));
        }
        KeyChange::InactivityDays(Some(days)) => {
            return Err(ApiError::bad_request(format!(
                "inactivity_interval must be 1 to {MAX_INACTIVITY_DAYS} days, not {days}"
            )));
        }
    }
    guarded(db, caller, key_id, RowChange::Update(Box::new(update))).await
}

/// Deletes a key, unless it is the caller's last usable one or the last usable key of any
/// administrator (409): either would lock someone out until a restart.
pub async fn delete_key(db: &DatabaseConnection, caller: &Caller, key_id: &str) -> ApiResult<()> {
    guarded(db, caller, key_id, RowChange::Delete).await
}

/// What a guarded change does to a key's row.
enum RowChange {
    Delete,
    Update(Box<api_keys::ActiveModel>),
}

/// Applies `change` to key `key_id` in one transaction serialized on the sign-in lock, and
/// takes it back (409) when it leaves the caller, or every administrator, without a usable
/// key: the one lock-out guard of deletes and updates.
async fn guarded(
    db: &DatabaseConnection,
    caller: &Caller,
    key_id: &str,
    change: RowChange,
) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    db::serialize_on(&txn, SIGN_IN_LOCK).await?;
    let key = api_keys::Entity::find_by_id(key_id.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("api key {key_id} not found")))?;
    let (yours, everyones) = match change {
        RowChange::Delete => {
            api_keys::Entity::delete_by_id(key.id.clone())
                .exec(&txn)
                .await?;
            (
                "this is your last usable API key: deleting it would lock you out; create another key first",
                "this is the last usable API key of any administrator: deleting it would leave no administrator able to sign in; give an administrator another key first",
            )
        }
        RowChange::Update(update) => {
            update.update(&txn).await?;
            (
                "this would leave you without a usable API key: you would be locked out; create another key first",
                "this would leave no administrator with a usable API key; give an administrator another key first",
            )
        }
    };
    if key.user_id == caller.user_id && usable_keys(&txn, &caller.user_id).await? == 0 {
        txn.rollback().await?;
        return Err(ApiError::conflict(yours));
    }
    if !an_administrator_can_sign_in(&txn).await? {
        txn.rollback().await?;
        return Err(ApiError::conflict(everyones));
    }
    txn.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_works_while_active_unexpired_and_recently_used() {
        let at = now();
        let day = Duration::days(1);
        assert!(key_works_at(true, None, None, at - day * 1000, at));
        assert!(!key_works_at(false, None, None, at, at));
        assert!(!key_works_at(true, Some(at), None, at, at));
        assert!(key_works_at(true, Some(at + day), None, at, at));
        assert!(key_works_at(true, None, Some(3), at - day * 2, at));
        assert!(!key_works_at(true, None, Some(3), at - day * 3, at));
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("30 days").unwrap(), Duration::days(30));
        assert_eq!(parse_interval("12h").unwrap(), Duration::hours(12));
        assert_eq!(parse_interval("1 week").unwrap(), Duration::weeks(1));
        assert!(parse_interval("soon").is_err());
        assert!(parse_interval("0 days").is_err());
        assert!(parse_interval("5 parsecs").is_err());
        // Past the clock's range: a 400, not a panic of admin-service.
        for huge in [
            "300000 years",
            "9223372036854775807 seconds",
            "99999999999999999999 s",
            "101 years",
        ] {
            assert!(
                parse_interval(huge)
                    .unwrap_err()
                    .message
                    .contains("interval"),
                "{huge}"
            );
        }
        assert_eq!(parse_interval("100 years").unwrap(), Duration::days(36_500));
    }

    #[test]
    fn secrets_are_random_and_hinted() {
        let a = new_secret();
        let b = new_secret();
        assert_ne!(a, b);
        assert!(a.starts_with("sk-") && a.len() == 51);
        assert!(hint(&a).ends_with(&a[a.len() - 4..]));
        assert_eq!(hash_key(&a).len(), 64);
        assert!(!hint(&a).contains(&a[3..20]));
    }
}
