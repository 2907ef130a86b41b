//! The start-up bootstrap: the built-in roles, the `admin` user and its key.

use docchat_common::error::ApiResult;
use docchat_common::time::now;
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};

use super::keys::{hash_key, insert_key, new_secret};
use super::roles::ensure_role;
use super::{ADMIN_ROLE, ADMIN_USERNAME, USER_ROLE, new_id};
use crate::entities::{api_keys, user_roles, users};

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
