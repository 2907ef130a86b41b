//! Runtime settings: global values (administrators), role and user overrides for the
//! overridable ones, and resolution user → roles by priority → global → default.

use std::collections::HashMap;

use docchat_common::error::{ApiError, ApiResult};
use docchat_common::settings::{DEFINITIONS, Definition, definition};
use docchat_common::time::now;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};

use crate::entities::settings;
use crate::identity;

pub const GLOBAL: &str = "global";
pub const ROLE: &str = "role";
pub const USER: &str = "user";

/// One row of the global listing: the stored value or the default.
#[derive(Debug, Clone)]
pub struct GlobalItem {
    pub definition: &'static Definition,
    pub value: String,
    pub can_overwrite: bool,
    pub is_public: bool,
}

fn lookup(name: &str) -> ApiResult<&'static Definition> {
    definition(name).ok_or_else(|| ApiError::bad_request(format!("unknown setting {name}")))
}

fn overridable(name: &str) -> ApiResult<&'static Definition> {
    let def = lookup(name)?;
    if def.overridable {
        Ok(def)
    } else {
        Err(ApiError::bad_request(format!(
            "{name} cannot be overridden per role or user"
        )))
    }
}

pub async fn list_global(db: &DatabaseConnection) -> ApiResult<Vec<GlobalItem>> {
    let stored: HashMap<String, settings::Model> = settings::Entity::find()
        .filter(settings::Column::Scope.eq(GLOBAL))
        .all(db)
        .await?
        .into_iter()
        .map(|s| (s.key_name.clone(), s))
        .collect();
    Ok(DEFINITIONS
        .iter()
        .map(|d| match stored.get(d.name) {
            Some(s) => GlobalItem {
                definition: d,
                value: s.string_value.clone(),
                can_overwrite: s.can_overwrite && d.overridable,
                is_public: s.is_public,
            },
            None => GlobalItem {
                definition: d,
                value: d.default.to_owned(),
                can_overwrite: d.overridable,
                is_public: false,
            },
        })
        .collect())
}

async fn upsert(
    db: &DatabaseConnection,
    scope: &str,
    scope_id: &str,
    key: &str,
    value: String,
    can_overwrite: bool,
    is_public: bool,
) -> ApiResult<()> {
    settings::Entity::insert(settings::ActiveModel {
        scope: Set(scope.to_owned()),
        scope_id: Set(scope_id.to_owned()),
        key_name: Set(key.to_owned()),
        string_value: Set(value),
        can_overwrite: Set(can_overwrite),
        is_public: Set(is_public),
        updated_at: Set(now()),
    })
    .on_conflict(
        OnConflict::columns([
            settings::Column::Scope,
            settings::Column::ScopeId,
            settings::Column::KeyName,
        ])
        .update_columns([
            settings::Column::StringValue,
            settings::Column::CanOverwrite,
            settings::Column::IsPublic,
            settings::Column::UpdatedAt,
        ])
        .to_owned(),
    )
    .exec(db)
    .await?;
    Ok(())
}

/// Validates and stores a global value; flags not given keep their stored value.
pub async fn set_global(
    db: &DatabaseConnection,
    key: &str,
    value: &str,
    can_overwrite: Option<bool>,
    is_public: Option<bool>,
) -> ApiResult<Vec<GlobalItem>> {
    let def = lookup(key)?;
    let value = def.validate(value)?;
    let current = list_global(db)
        .await?
        .into_iter()
        .find(|i| i.definition.name == key);
    let (cur_overwrite, cur_public) = current
        .map(|c| (c.can_overwrite, c.is_public))
        .unwrap_or((def.overridable, false));
    upsert(
        db,
        GLOBAL,
        "",
        key,
        value,
        can_overwrite.unwrap_or(cur_overwrite) && def.overridable,
        is_public.unwrap_or(cur_public),
    )
    .await?;
    list_global(db).await
}

pub async fn list_scoped(
    db: &DatabaseConnection,
    scope: &str,
    scope_id: &str,
) -> ApiResult<Vec<settings::Model>> {
    Ok(settings::Entity::find()
        .filter(settings::Column::Scope.eq(scope))
        .filter(settings::Column::ScopeId.eq(scope_id))
        .order_by_asc(settings::Column::KeyName)
        .all(db)
        .await?)
}

/// Stores a role (`ROLE`) or user (`USER`) override of an overridable setting; answers
/// every override of that role or user.
pub async fn set_override(
    db: &DatabaseConnection,
    scope: &str,
    scope_id: &str,
    key: &str,
    value: &str,
) -> ApiResult<Vec<settings::Model>> {
    match scope {
        ROLE => identity::find_role(db, scope_id).await.map(drop)?,
        _ => identity::find_user(db, scope_id).await.map(drop)?,
    }
    let value = overridable(key)?.validate(value)?;
    upsert(db, scope, scope_id, key, value, true, false).await?;
    list_scoped(db, scope, scope_id).await
}

/// Removes the stored values `keys` of a scope: global ones fall back to their defaults, a
/// role's or user's overrides to what is in force above them. Unknown names are refused
/// (400) before anything is removed; so is a role or user that does not exist (404).
pub async fn delete(
    db: &DatabaseConnection,
    scope: &str,
    scope_id: &str,
    keys: &[String],
) -> ApiResult<()> {
    if keys.is_empty() {
        return Err(ApiError::bad_request("name at least one setting"));
    }
    for key in keys {
        lookup(key)?;
    }
    match scope {
        ROLE => identity::find_role(db, scope_id).await.map(drop)?,
        USER => identity::find_user(db, scope_id).await.map(drop)?,
        _ => {}
    }
    settings::Entity::delete_many()
        .filter(settings::Column::Scope.eq(scope))
        .filter(settings::Column::ScopeId.eq(scope_id))
        .filter(settings::Column::KeyName.is_in(keys.iter().map(String::as_str)))
        .exec(db)
        .await?;
    Ok(())
}

/// A role's overrides; 404 for an unknown role.
pub async fn list_role(db: &DatabaseConnection, role_id: &str) -> ApiResult<Vec<settings::Model>> {
    identity::find_role(db, role_id).await.map(drop)?;
    list_scoped(db, ROLE, role_id).await
}

/// Every setting's value in force for `user_id`.
pub async fn resolve(db: &DatabaseConnection, user_id: &str) -> ApiResult<HashMap<String, String>> {
    let global = list_global(db).await?;
    let roles = identity::user_roles_by_priority(db, user_id).await?;
    let mut role_values: Vec<HashMap<String, String>> = Vec::with_capacity(roles.len());
    for role in &roles {
        role_values.push(
            list_scoped(db, ROLE, &role.id)
                .await?
                .into_iter()
                .map(|s| (s.key_name, s.string_value))
                .collect(),
        );
    }
    let user_values: HashMap<String, String> = list_scoped(db, USER, user_id)
        .await?
        .into_iter()
        .map(|s| (s.key_name, s.string_value))
        .collect();
    Ok(global
        .into_iter()
        .map(|item| {
            let name = item.definition.name;
            let value = if item.can_overwrite {
                user_values
                    .get(name)
                    .or_else(|| role_values.iter().find_map(|r| r.get(name)))
                    .cloned()
                    .unwrap_or(item.value)
            } else {
                item.value
            };
            (name.to_owned(), value)
        })
        .collect())
}
