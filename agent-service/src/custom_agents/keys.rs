//! Stored agent keys (/agents/keys): name, type, description and the value sealed by
//! [`Cipher`]. The value is write-only: no answer carries it, nothing logs it; it is opened
//! only for a run ([`KeyStore::value_of`]) or by [`Secrets`] (tools resolving a user's keys).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult};

use super::cipher::Cipher;
use super::db_error;
use crate::preferences::stmt;
use crate::tools::custom::Secrets;

/// The types a user may create; `built_in` is only answered.
const TYPES: [&str; 2] = ["private", "shared"];

#[derive(Clone)]
pub struct KeyStore {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
}

const COLUMNS: &str = "id, owner_email, name, key_type, description, created_at, updated_at";

fn key_of(r: &QueryResult) -> ApiResult<pb::AgentKey> {
    let at = |c: &str| -> ApiResult<String> {
        Ok(r.try_get::<DateTime<Utc>>("", c)
            .map_err(db_error)?
            .to_rfc3339())
    };
    Ok(pb::AgentKey {
        id: r.try_get("", "id").map_err(db_error)?,
        name: r.try_get("", "name").map_err(db_error)?,
        r#type: r.try_get("", "key_type").map_err(db_error)?,
        description: r.try_get("", "description").map_err(db_error)?,
        created_at: at("created_at")?,
        updated_at: at("updated_at")?,
        owner_email: r.try_get("", "owner_email").map_err(db_error)?,
    })
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
    let rows = db
        .query_all(stmt(
            db,
            &format!("SELECT {COLUMNS} FROM agent_keys WHERE owner_id = ? ORDER BY created_at, id"),
            vec![owner_id.into()],
        ))
        .await
        .map_err(db_error)?;
    rows.iter().map(key_of).collect()
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
        let row = self
            .db
            .query_one(stmt(
                &self.db,
                &format!("SELECT {COLUMNS} FROM agent_keys WHERE owner_id = ? AND id = ?"),
                vec![caller.user_id.clone().into(), id.into()],
            ))
            .await
            .map_err(db_error)?
            .ok_or_else(|| ApiError::not_found(format!("agent key {id} not found")))?;
        key_of(&row)
    }

    async fn name_taken(&self, caller: &Caller, name: &str, except: &str) -> ApiResult<bool> {
        Ok(self
            .db
            .query_one(stmt(
                &self.db,
                "SELECT id FROM agent_keys WHERE owner_id = ? AND name = ? AND id <> ?",
                vec![caller.user_id.clone().into(), name.into(), except.into()],
            ))
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
        self.db
            .execute(stmt(
                &self.db,
                "INSERT INTO agent_keys (id, owner_id, owner_email, name, key_type, description, sealed, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    id.clone().into(),
                    caller.user_id.clone().into(),
                    caller.email.clone().into(),
                    new.name.into(),
                    new.r#type.into(),
                    new.description.into(),
                    sealed.into(),
                    now.into(),
                    now.into(),
                ],
            ))
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
        self.db
            .execute(stmt(
                &self.db,
                "UPDATE agent_keys SET name = ?, key_type = ?, description = ?, updated_at = ? WHERE owner_id = ? AND id = ?",
                vec![
                    name.into(),
                    kind.into(),
                    description.into(),
                    now.into(),
                    caller.user_id.clone().into(),
                    u.id.clone().into(),
                ],
            ))
            .await
            .map_err(db_error)?;
        if let Some(value) = u.value.filter(|v| !v.is_empty()) {
            let sealed = self.cipher.seal(&Self::row(&caller.user_id, &u.id), &value);
            self.db
                .execute(stmt(
                    &self.db,
                    "UPDATE agent_keys SET sealed = ? WHERE owner_id = ? AND id = ?",
                    vec![
                        sealed.into(),
                        caller.user_id.clone().into(),
                        u.id.clone().into(),
                    ],
                ))
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
            let done = self
                .db
                .execute(stmt(
                    &self.db,
                    "DELETE FROM agent_keys WHERE owner_id = ? AND id = ?",
                    vec![caller.user_id.clone().into(), id.clone().into()],
                ))
                .await
                .map_err(db_error)?;
            if done.rows_affected() > 0 {
                count += done.rows_affected();
                self.db
                    .execute(stmt(
                        &self.db,
                        "UPDATE custom_agent_key_associations SET key_id = NULL WHERE owner_id = ? AND key_id = ?",
                        vec![caller.user_id.clone().into(), id.clone().into()],
                    ))
                    .await
                    .map_err(db_error)?;
            }
        }
        Ok(count)
    }

    /// The value of `owner_id`'s key `id`, opened; only for a run.
    pub async fn value_of(&self, owner_id: &str, id: &str) -> ApiResult<Option<String>> {
        self.sealed_value(
            "SELECT id, sealed FROM agent_keys WHERE owner_id = ? AND id = ?",
            owner_id,
            id,
        )
        .await
    }

    async fn sealed_value(&self, sql: &str, owner_id: &str, by: &str) -> ApiResult<Option<String>> {
        let row = self
            .db
            .query_one(stmt(&self.db, sql, vec![owner_id.into(), by.into()]))
            .await
            .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let id: String = row.try_get("", "id").map_err(db_error)?;
        let sealed: Vec<u8> = row.try_get("", "sealed").map_err(db_error)?;
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
        self.sealed_value(
            "SELECT id, sealed FROM agent_keys WHERE owner_id = ? AND name = ?",
            owner_id,
            name,
        )
        .await
        .ok()
        .flatten()
    }
}
