//! Users, API keys, roles, groups and permissions.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use docchat_common::Caller;
use docchat_common::auth::permissions;
use docchat_common::db;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use rand::Rng;
use rand::distr::Alphanumeric;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use sha2::{Digest, Sha256};

use crate::entities::{api_keys, role_permissions, roles, user_groups, user_roles, users};

pub const ADMIN_ROLE: &str = "admin";
pub const USER_ROLE: &str = "user";
pub const ADMIN_USERNAME: &str = "admin";

/// A user with the memberships that make up an identity.
#[derive(Debug, Clone)]
pub struct UserView {
    pub user: users::Model,
    pub roles: Vec<String>,
    pub groups: Vec<String>,
}

/// What an API key resolves to.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user: users::Model,
    pub roles: Vec<String>,
    pub groups: Vec<String>,
    pub permissions: Vec<String>,
    pub is_admin: bool,
    pub api_key_id: String,
    /// When the key that resolved to this identity expires.
    pub key_expires_at: Option<DateTime<Utc>>,
}

pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn new_secret() -> String {
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

fn new_id() -> String {
    docchat_common::ids::new_id()
}

/// Parses an expiry interval such as `30 days`, `12h`, `1 week`.
/// The longest interval a key may be given (100 years).
const MAX_INTERVAL_SECONDS: i64 = 100 * 365 * 86_400;

pub fn parse_interval(text: &str) -> ApiResult<Duration> {
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

pub async fn role_by_name<C: ConnectionTrait>(
    db: &C,
    name: &str,
) -> ApiResult<Option<roles::Model>> {
    Ok(roles::Entity::find()
        .filter(roles::Column::Name.eq(name))
        .one(db)
        .await?)
}

async fn ensure_role<C: ConnectionTrait>(
    db: &C,
    name: &str,
    description: &str,
    priority: i32,
) -> ApiResult<roles::Model> {
    if let Some(role) = role_by_name(db, name).await? {
        return Ok(role);
    }
    Ok(roles::ActiveModel {
        id: Set(new_id()),
        name: Set(name.to_owned()),
        description: Set(description.to_owned()),
        priority: Set(priority),
        created_at: Set(now()),
    }
    .insert(db)
    .await?)
}

/// Creates the built-in roles and the `admin` user; the bootstrap key (or a generated one,
/// returned so it can be shown once) becomes the admin's key.
pub async fn bootstrap(
    db: &DatabaseConnection,
    bootstrap_key: Option<&str>,
) -> ApiResult<Option<String>> {
    let txn = docchat_common::db::begin(db).await?;
    let admin_role =
        ensure_role(&txn, ADMIN_ROLE, "administrators: every permission", 1000).await?;
    ensure_role(&txn, USER_ROLE, "regular users", 0).await?;
    let existing = users::Entity::find()
        .filter(users::Column::Username.eq(ADMIN_USERNAME))
        .one(&txn)
        .await?;
    let admin = match existing {
        Some(u) => u,
        None => {
            let user = users::ActiveModel {
                id: Set(new_id()),
                username: Set(ADMIN_USERNAME.to_owned()),
                email: Set("admin@localhost".to_owned()),
                created_at: Set(now()),
            }
            .insert(&txn)
            .await?;
            user_roles::ActiveModel {
                user_id: Set(user.id.clone()),
                role_id: Set(admin_role.id.clone()),
            }
            .insert(&txn)
            .await?;
            user
        }
    };
    let has_keys = api_keys::Entity::find()
        .filter(api_keys::Column::UserId.eq(admin.id.clone()))
        .one(&txn)
        .await?
        .is_some();
    let generated = match bootstrap_key {
        Some(key) => {
            let known = api_keys::Entity::find()
                .filter(api_keys::Column::KeyHash.eq(hash_key(key)))
                .one(&txn)
                .await?
                .is_some();
            if !known {
                insert_key(&txn, &admin.id, "bootstrap", key, None).await?;
            }
            None
        }
        None if !has_keys => {
            let key = new_secret();
            insert_key(&txn, &admin.id, "bootstrap", &key, None).await?;
            Some(key)
        }
        None => None,
    };
    txn.commit().await?;
    Ok(generated)
}

async fn insert_key<C: ConnectionTrait>(
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
    }
    .insert(db)
    .await?)
}

async fn memberships<C: ConnectionTrait>(
    db: &C,
    user_id: &str,
) -> ApiResult<(Vec<roles::Model>, Vec<String>)> {
    let role_ids: Vec<String> = user_roles::Entity::find()
        .filter(user_roles::Column::UserId.eq(user_id))
        .all(db)
        .await?
        .into_iter()
        .map(|r| r.role_id)
        .collect();
    let mut roles = roles::Entity::find()
        .filter(roles::Column::Id.is_in(role_ids))
        .all(db)
        .await?;
    roles.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
    let groups = user_groups::Entity::find()
        .filter(user_groups::Column::UserId.eq(user_id))
        .order_by_asc(user_groups::Column::GroupId)
        .all(db)
        .await?
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    Ok((roles, groups))
}

/// The user's roles, highest priority first.
pub async fn user_roles_by_priority<C: ConnectionTrait>(
    db: &C,
    user_id: &str,
) -> ApiResult<Vec<roles::Model>> {
    Ok(memberships(db, user_id).await?.0)
}

pub async fn user_view<C: ConnectionTrait>(db: &C, user: users::Model) -> ApiResult<UserView> {
    let (roles, groups) = memberships(db, &user.id).await?;
    Ok(UserView {
        user,
        roles: roles.into_iter().map(|r| r.name).collect(),
        groups,
    })
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
    if !key.is_active || key.expires_at.is_some_and(|e| e <= at) {
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

/// What `user` may do, as a key of theirs (`api_key_id`) resolves: roles, groups and the
/// permissions of the roles (every permission for administrators).
pub async fn identity_of(
    db: &DatabaseConnection,
    user: users::Model,
    api_key_id: String,
) -> ApiResult<Identity> {
    let (roles, groups) = memberships(db, &user.id).await?;
    let is_admin = roles.iter().any(|r| r.name == ADMIN_ROLE);
    let permissions = if is_admin {
        permissions::ALL
            .iter()
            .map(|(p, _)| (*p).to_owned())
            .collect()
    } else {
        let role_ids: Vec<String> = roles.iter().map(|r| r.id.clone()).collect();
        role_permissions::Entity::find()
            .filter(role_permissions::Column::RoleId.is_in(role_ids))
            .all(db)
            .await?
            .into_iter()
            .map(|p| p.permission)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    Ok(Identity {
        user,
        roles: roles.into_iter().map(|r| r.name).collect(),
        groups,
        permissions,
        is_admin,
        api_key_id,
        key_expires_at: None,
    })
}

fn validate_username(username: &str) -> ApiResult<()> {
    let ok = !username.is_empty()
        && username.len() <= 128
        && username
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "username must be 1 to 128 letters, digits or _ - . @",
        ))
    }
}

pub async fn create_user(
    db: &DatabaseConnection,
    username: &str,
    email: &str,
    role_names: &[String],
    groups: &[String],
) -> ApiResult<UserView> {
    validate_username(username)?;
    let email = email.trim();
    if !email.is_empty() && (!email.contains('@') || email.len() > 255) {
        return Err(ApiError::bad_request("email must be an address"));
    }
    if groups.iter().any(|g| g.trim().is_empty() || g.len() > 255) {
        return Err(ApiError::bad_request(
            "group ids must be 1 to 255 characters",
        ));
    }
    let txn = docchat_common::db::begin(db).await?;
    if users::Entity::find()
        .filter(users::Column::Username.eq(username))
        .one(&txn)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "user {username} already exists"
        )));
    }
    let mut wanted: Vec<String> = role_names.to_vec();
    if wanted.is_empty() {
        wanted.push(USER_ROLE.to_owned());
    }
    let mut role_ids = Vec::new();
    for name in &wanted {
        let role = role_by_name(&txn, name)
            .await?
            .ok_or_else(|| ApiError::bad_request(format!("role {name} does not exist")))?;
        role_ids.push(role.id);
    }
    let user = users::ActiveModel {
        id: Set(new_id()),
        username: Set(username.to_owned()),
        email: Set(email.to_owned()),
        created_at: Set(now()),
    }
    .insert(&txn)
    .await?;
    role_ids.sort();
    role_ids.dedup();
    for role_id in role_ids {
        user_roles::ActiveModel {
            user_id: Set(user.id.clone()),
            role_id: Set(role_id),
        }
        .insert(&txn)
        .await?;
    }
    let mut groups: Vec<String> = groups.iter().map(|g| g.trim().to_owned()).collect();
    groups.sort();
    groups.dedup();
    for group_id in groups {
        user_groups::ActiveModel {
            user_id: Set(user.id.clone()),
            group_id: Set(group_id),
        }
        .insert(&txn)
        .await?;
    }
    let view = user_view(&txn, user).await?;
    txn.commit().await?;
    Ok(view)
}

pub async fn list_users(
    db: &DatabaseConnection,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<UserView>> {
    let users = users::Entity::find()
        .order_by_asc(users::Column::CreatedAt)
        .order_by_asc(users::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(db)
        .await?;
    let mut out = Vec::with_capacity(users.len());
    for user in users {
        out.push(user_view(db, user).await?);
    }
    Ok(out)
}

pub async fn find_user(db: &DatabaseConnection, user_id: &str) -> ApiResult<users::Model> {
    users::Entity::find_by_id(user_id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("user {user_id} not found")))
}

/// The user named `username`: how a share by username finds its user.
pub async fn find_by_username(db: &DatabaseConnection, username: &str) -> ApiResult<users::Model> {
    users::Entity::find()
        .filter(users::Column::Username.eq(username))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("user {username} not found")))
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

/// Serializes the changes that could leave no administrator able to sign in (PostgreSQL;
/// on SQLite they write before they check).
const SIGN_IN_LOCK: &str = "admin.sign-in";

/// How long a key must still live to count as a way back in: a key that expires within the
/// hour is no spare for the one being deleted (the admin would be locked out soon after).
const USABLE_FOR: Duration = Duration::hours(1);

/// Keys of `user_id` that work now and for at least [`USABLE_FOR`]: active, not expiring soon.
async fn usable_keys<C: ConnectionTrait>(db: &C, user_id: &str) -> ApiResult<u64> {
    Ok(api_keys::Entity::find()
        .filter(api_keys::Column::UserId.eq(user_id))
        .filter(api_keys::Column::IsActive.eq(true))
        .filter(
            sea_orm::Condition::any()
                .add(api_keys::Column::ExpiresAt.is_null())
                .add(api_keys::Column::ExpiresAt.gt(now() + USABLE_FOR)),
        )
        .count(db)
        .await?)
}

/// Whether some administrator still holds a usable key: without one, nobody can manage
/// users, keys or settings until a restart brings the bootstrap key back.
async fn an_administrator_can_sign_in<C: ConnectionTrait>(db: &C) -> ApiResult<bool> {
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

/// Deletes a key, unless it is the caller's last usable one or the last usable key of any
/// administrator (409): either would lock someone out until a restart.
pub async fn delete_key(db: &DatabaseConnection, caller: &Caller, key_id: &str) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    db::serialize_on(&txn, SIGN_IN_LOCK).await?;
    let key = api_keys::Entity::find_by_id(key_id.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("api key {key_id} not found")))?;
    api_keys::Entity::delete_by_id(key.id.clone())
        .exec(&txn)
        .await?;
    if key.user_id == caller.user_id && usable_keys(&txn, &caller.user_id).await? == 0 {
        txn.rollback().await?;
        return Err(ApiError::conflict(
            "this is your last usable API key: deleting it would lock you out; create another key first",
        ));
    }
    if !an_administrator_can_sign_in(&txn).await? {
        txn.rollback().await?;
        return Err(ApiError::conflict(
            "this is the last usable API key of any administrator: deleting it would leave no administrator able to sign in; give an administrator another key first",
        ));
    }
    txn.commit().await?;
    Ok(())
}

pub async fn create_role(
    db: &DatabaseConnection,
    name: &str,
    description: &str,
) -> ApiResult<roles::Model> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 255 || name.contains(',') {
        return Err(ApiError::bad_request(
            "role name must be 1 to 255 characters without commas",
        ));
    }
    if role_by_name(db, name).await?.is_some() {
        return Err(ApiError::conflict(format!("role {name} already exists")));
    }
    Ok(roles::ActiveModel {
        id: Set(new_id()),
        name: Set(name.to_owned()),
        description: Set(description.to_owned()),
        priority: Set(0),
        created_at: Set(now()),
    }
    .insert(db)
    .await?)
}

pub async fn list_roles(db: &DatabaseConnection) -> ApiResult<Vec<roles::Model>> {
    Ok(roles::Entity::find()
        .order_by_desc(roles::Column::Priority)
        .order_by_asc(roles::Column::Name)
        .all(db)
        .await?)
}

pub async fn find_role(db: &DatabaseConnection, role_id: &str) -> ApiResult<roles::Model> {
    roles::Entity::find_by_id(role_id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("role {role_id} not found")))
}

pub async fn set_role_priority(
    db: &DatabaseConnection,
    role_id: &str,
    priority: i32,
) -> ApiResult<roles::Model> {
    let role = find_role(db, role_id).await?;
    let mut active: roles::ActiveModel = role.into();
    active.priority = Set(priority);
    Ok(active.update(db).await?)
}

fn known_permission(name: &str) -> ApiResult<()> {
    if permissions::ALL.iter().any(|(p, _)| *p == name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!("unknown permission {name}")))
    }
}

pub async fn assign_permission(
    db: &DatabaseConnection,
    role_id: &str,
    permission: &str,
) -> ApiResult<()> {
    find_role(db, role_id).await?;
    known_permission(permission)?;
    role_permissions::Entity::insert(role_permissions::ActiveModel {
        role_id: Set(role_id.to_owned()),
        permission: Set(permission.to_owned()),
    })
    .on_conflict(
        OnConflict::columns([
            role_permissions::Column::RoleId,
            role_permissions::Column::Permission,
        ])
        .do_nothing()
        .to_owned(),
    )
    .do_nothing()
    .exec(db)
    .await?;
    Ok(())
}

pub async fn remove_permission(
    db: &DatabaseConnection,
    role_id: &str,
    permission: &str,
) -> ApiResult<()> {
    find_role(db, role_id).await?;
    known_permission(permission)?;
    role_permissions::Entity::delete_many()
        .filter(role_permissions::Column::RoleId.eq(role_id))
        .filter(role_permissions::Column::Permission.eq(permission))
        .exec(db)
        .await?;
    Ok(())
}

/// `names` may hold several comma-separated role names (as the client sends them).
pub async fn set_user_roles(
    db: &DatabaseConnection,
    user_id: &str,
    names: &[String],
    add: bool,
) -> ApiResult<()> {
    find_user(db, user_id).await?;
    let txn = docchat_common::db::begin(db).await?;
    for name in names
        .iter()
        .flat_map(|n| n.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let role = role_by_name(&txn, name)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("role {name} not found")))?;
        if add {
            user_roles::Entity::insert(user_roles::ActiveModel {
                user_id: Set(user_id.to_owned()),
                role_id: Set(role.id),
            })
            .on_conflict(
                OnConflict::columns([user_roles::Column::UserId, user_roles::Column::RoleId])
                    .do_nothing()
                    .to_owned(),
            )
            .do_nothing()
            .exec(&txn)
            .await?;
        } else {
            if role.name == ADMIN_ROLE {
                db::serialize_on(&txn, SIGN_IN_LOCK).await?;
            }
            user_roles::Entity::delete_many()
                .filter(user_roles::Column::UserId.eq(user_id))
                .filter(user_roles::Column::RoleId.eq(role.id))
                .exec(&txn)
                .await?;
            if role.name == ADMIN_ROLE && !an_administrator_can_sign_in(&txn).await? {
                txn.rollback().await?;
                return Err(ApiError::conflict(
                    "removing the admin role here would leave no administrator with a usable API key; give another administrator a key first",
                ));
            }
        }
    }
    txn.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
