//! Stored agent keys (/agents/keys): name, type, description and the value sealed by
//! [`Cipher`]. The value is write-only: no answer carries it, nothing logs it; it is opened
//! only for a run ([`KeyStore::value_of`]) or by [`Secrets`] (tools resolving a user's keys).

use std::sync::Arc;

use chrono::Utc;
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use super::cipher::Cipher;
use super::db_error;
use crate::entities::Owned;
use crate::entities::agent_keys::{self, Column as C};
use crate::entities::custom_agent_key_associations;
use crate::tools::custom::Secrets;

/// The types a user may create; `built_in` is only answered.
const TYPES: [&str; 2] = ["private", "shared"];

#[derive(Clone)]
pub struct KeyStore {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
}

fn key_of(r: agent_keys::Head) -> pb::AgentKey {
    pb::AgentKey {
        id: r.id,
        name: r.name,
        r#type: r.key_type,
        description: r.description,
        created_at: r.created_at.to_rfc3339(),
        updated_at: r.updated_at.to_rfc3339(),
        owner_email: r.owner_email,
    }
}

fn check_type(t: &str) -> ApiResult<()> {
    if TYPES.contains(&t) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "type must be one of private, shared, not {t:?}"
        )))
    }
}

fn check_name(n: &str) -> ApiResult<()> {
    if n.trim().is_empty() {
        Err(ApiError::bad_request("name is required"))
    } else {
        Ok(())
    }
}

/// `owner_id`'s keys (without values).
pub async fn list(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<pb::AgentKey>> {
    Ok(agent_keys::Entity::find_by_owner(owner_id)
        .order_by_asc(C::CreatedAt)
        .order_by_asc(C::Id)
        .into_partial_model::<agent_keys::Head>()
        .all(db)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(key_of)
        .collect())
}

impl KeyStore {
    fn row(owner: &str, id: &str) -> String {
        format!("{owner}/{id}")
    }

    pub async fn list(&self, caller: &Caller) -> ApiResult<Vec<pb::AgentKey>> {
        list(&self.db, &caller.user_id).await
    }

    /// The caller's key `id`; NOT_FOUND otherwise.
    pub async fn get(&self, caller: &Caller, id: &str) -> ApiResult<pb::AgentKey> {
        agent_keys::Entity::find_owned(&caller.user_id, id)
            .into_partial_model::<agent_keys::Head>()
            .one(&self.db)
            .await
            .map_err(db_error)?
            .map(key_of)
            .ok_or_else(|| ApiError::not_found(format!("agent key {id} not found")))
    }

    async fn name_taken(&self, caller: &Caller, name: &str, except: &str) -> ApiResult<bool> {
        Ok(agent_keys::Entity::find_by_owner(&caller.user_id)
            .filter(C::Name.eq(name))
            .filter(C::Id.ne(except))
            .select_only()
            .column(C::Id)
            .into_tuple::<String>()
            .one(&self.db)
            .await
            .map_err(db_error)?
            .is_some())
    }

    pub async fn create(&self, caller: &Caller, new: pb::NewAgentKey) -> ApiResult<pb::AgentKey> {
        check_name(&new.name)?;
        check_type(&new.r#type)?;
        if new.value.is_empty() {
            return Err(ApiError::bad_request("value is required"));
        }
        if self.name_taken(caller, &new.name, "").await? {
            return Err(ApiError::conflict(format!(
                "an agent key named {:?} already exists",
                new.name
            )));
        }
        let id = docchat_common::ids::new_id();
        let sealed = self
            .cipher
            .seal(&Self::row(&caller.user_id, &id), &new.value);
        let now = Utc::now();
        agent_keys::Entity::insert(agent_keys::ActiveModel {
            id: Set(id.clone()),
            owner_id: Set(caller.user_id.clone()),
            owner_email: Set(caller.email.clone()),
            name: Set(new.name),
            key_type: Set(new.r#type),
            description: Set(new.description),
            sealed: Set(sealed),
            created_at: Set(now),
            updated_at: Set(now),
        })
        .exec_without_returning(&self.db)
        .await
        .map_err(db_error)?;
        self.get(caller, &id).await
    }

    pub async fn update(&self, caller: &Caller, u: pb::AgentKeyUpdate) -> ApiResult<pb::AgentKey> {
        let current = self.get(caller, &u.id).await?;
        let name = u.name.unwrap_or(current.name);
        check_name(&name)?;
        let kind = u.r#type.unwrap_or(current.r#type);
        check_type(&kind)?;
        if self.name_taken(caller, &name, &u.id).await? {
            return Err(ApiError::conflict(format!(
                "an agent key named {name:?} already exists"
            )));
        }
        let description = u.description.unwrap_or(current.description);
        let now = Utc::now();
        agent_keys::Entity::update_owned(&caller.user_id, &u.id)
            .set(agent_keys::ActiveModel {
                name: Set(name),
                key_type: Set(kind),
                description: Set(description),
                updated_at: Set(now),
                ..Default::default()
            })
            .exec(&self.db)
            .await
            .map_err(db_error)?;
        if let Some(value) = u.value.filter(|v| !v.is_empty()) {
            let sealed = self.cipher.seal(&Self::row(&caller.user_id, &u.id), &value);
            agent_keys::Entity::update_owned(&caller.user_id, &u.id)
                .set(agent_keys::ActiveModel {
                    sealed: Set(sealed),
                    ..Default::default()
                })
                .exec(&self.db)
                .await
                .map_err(db_error)?;
        }
        self.get(caller, &u.id).await
    }

    /// Deletes the caller's keys `ids`, all or none: an id that is not one of the caller's
    /// keys (another user's, or none at all) is a 404 and nothing is deleted, as every other
    /// foreign delete. Their associations become declared-but-not-given again.
    pub async fn delete(&self, caller: &Caller, ids: &[String]) -> ApiResult<u64> {
        for id in ids {
            self.get(caller, id).await?;
        }
        let mut count = 0;
        for id in ids {
            let done = agent_keys::Entity::delete_owned(&caller.user_id, id)
                .exec(&self.db)
                .await
                .map_err(db_error)?;
            if done.rows_affected > 0 {
                count += done.rows_affected;
                custom_agent_key_associations::Entity::update_by_owner(&caller.user_id)
                    .filter(custom_agent_key_associations::Column::KeyId.eq(id.as_str()))
                    .set(custom_agent_key_associations::ActiveModel {
                        key_id: Set(None),
                        ..Default::default()
                    })
                    .exec(&self.db)
                    .await
                    .map_err(db_error)?;
            }
        }
        Ok(count)
    }

    /// The value of `owner_id`'s key `id`, opened; only for a run.
    pub async fn value_of(&self, owner_id: &str, id: &str) -> ApiResult<Option<String>> {
        self.sealed_value(owner_id, C::Id, id).await
    }

    /// The value of `owner_id`'s key whose `column` is `by`, opened.
    async fn sealed_value(&self, owner_id: &str, column: C, by: &str) -> ApiResult<Option<String>> {
        let row = agent_keys::Entity::find_by_owner(owner_id)
            .filter(column.eq(by))
            .select_only()
            .columns([C::Id, C::Sealed])
            .into_tuple::<(String, Vec<u8>)>()
            .one(&self.db)
            .await
            .map_err(db_error)?;
        let Some((id, sealed)) = row else {
            return Ok(None);
        };
        let value = self.cipher.open(&Self::row(owner_id, &id), &sealed);
        if value.is_none() {
            // The id only: never the value.
            tracing::warn!(key_id = %id, "a stored agent key does not open with this deployment's secret");
        }
        Ok(value)
    }
}

#[async_trait::async_trait]
impl Secrets for KeyStore {
    async fn value(&self, owner_id: &str, name: &str) -> Option<String> {
        self.sealed_value(owner_id, C::Name, name)
            .await
            .ok()
            .flatten()
    }
}
