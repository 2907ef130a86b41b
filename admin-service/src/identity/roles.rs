//! Roles and the permissions they grant.

use docchat_common::auth::permissions;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};

use super::new_id;
use crate::entities::{role_permissions, roles};

pub(super) async fn role_by_name<C: ConnectionTrait>(
    db: &C,
    name: &str,
) -> ApiResult<Option<roles::Model>> {
    Ok(roles::Entity::find()
        .filter(roles::Column::Name.eq(name))
        .one(db)
        .await?)
}

pub(super) async fn ensure_role<C: ConnectionTrait>(
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
