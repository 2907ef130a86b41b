//! Users: their memberships (roles and groups), what they may do, creating and finding
//! them, and giving or taking their roles.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use docchat_common::auth::permissions;
use docchat_common::db;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};

use super::lockout::{SIGN_IN_LOCK, an_administrator_can_sign_in};
use super::roles::role_by_name;
use super::{ADMIN_ROLE, USER_ROLE, new_id};
use crate::entities::{role_permissions, roles, user_groups, user_roles, users};

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
