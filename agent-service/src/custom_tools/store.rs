//! The custom_tools table: one row per tool with the uploaded bytes (so any replica can
//! materialize its files). Every read and write is scoped to the owner: another user's
//! tool does not exist for the caller.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use sha2::{Digest, Sha256};

use crate::entities::custom_tools::{self, Column as C};
use crate::entities::{JsonText, Owned};
use crate::tools::custom::{ToolRecord, ToolType};

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("custom tools", e)
}

/// A tool about to be stored.
#[derive(Debug, Clone)]
pub struct NewTool {
    pub tool_name: String,
    pub tool_type: ToolType,
    pub args: serde_json::Value,
    pub file_name: Option<String>,
    /// The uploaded bytes (none for a remote_mcp, whose config lives in its args).
    pub file: Option<Vec<u8>>,
}

/// A tool's uploaded file.
pub struct StoredFile {
    pub name: String,
    pub sha256: String,
    pub data: Vec<u8>,
}

fn record(row: custom_tools::Head) -> ApiResult<ToolRecord> {
    Ok(ToolRecord {
        tool_type: ToolType::parse(&row.tool_type).ok_or_else(|| {
            ApiError::internal("custom tools", format!("tool_type {}", row.tool_type))
        })?,
        id: row.id,
        owner_id: row.owner_id,
        owner_email: row.owner_email,
        tool_name: row.tool_name,
        args: row.tool_args.0,
        file_name: row.file_name,
    })
}

/// Stores `tools` for `owner` in one transaction (all or none); their ids in order.
pub async fn insert(
    db: &DatabaseConnection,
    owner_id: &str,
    owner_email: &str,
    tools: Vec<NewTool>,
) -> ApiResult<Vec<String>> {
    let tx = docchat_common::db::begin(db).await.map_err(db_error)?;
    let now = chrono::Utc::now();
    let mut ids = Vec::with_capacity(tools.len());
    for (i, t) in tools.into_iter().enumerate() {
        // The tools of one upload list in their order (a microsecond apart).
        let now = now + chrono::Duration::microseconds(i as i64);
        let id = docchat_common::ids::new_id();
        let sha = t.file.as_ref().map(|b| hex::encode(Sha256::digest(b)));
        custom_tools::Entity::insert(custom_tools::ActiveModel {
            id: Set(id.clone()),
            owner_id: Set(owner_id.to_owned()),
            owner_email: Set(owner_email.to_owned()),
            tool_name: Set(t.tool_name),
            tool_type: Set(t.tool_type.as_str().to_owned()),
            tool_args: Set(JsonText(t.args)),
            file_name: Set(t.file_name),
            file_data: Set(t.file),
            file_sha256: Set(sha),
            created_at: Set(now),
            updated_at: Set(now),
        })
        .exec_without_returning(&tx)
        .await
        .map_err(db_error)?;
        ids.push(id);
    }
    tx.commit().await.map_err(db_error)?;
    Ok(ids)
}

/// The owner's tools, oldest first.
pub async fn list(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<ToolRecord>> {
    custom_tools::Entity::find_by_owner(owner_id)
        .order_by_asc(C::CreatedAt)
        .order_by_asc(C::Id)
        .into_partial_model::<custom_tools::Head>()
        .all(db)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(record)
        .collect()
}

/// The owner's tool `id`; `None` when missing or another user's.
pub async fn get(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<ToolRecord>> {
    custom_tools::Entity::find_owned(owner_id, id)
        .into_partial_model::<custom_tools::Head>()
        .one(db)
        .await
        .map_err(db_error)?
        .map(record)
        .transpose()
}

/// The uploaded file of the owner's tool `id`; `None` when missing, not owned or without
/// a file.
pub async fn file(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<StoredFile>> {
    let row = custom_tools::Entity::find_owned(owner_id, id)
        .filter(C::FileData.is_not_null())
        .select_only()
        .columns([C::FileName, C::FileData, C::FileSha256])
        .into_tuple::<(Option<String>, Vec<u8>, Option<String>)>()
        .one(db)
        .await
        .map_err(db_error)?;
    Ok(row.map(|(name, data, sha256)| StoredFile {
        name: name.unwrap_or_default(),
        sha256: sha256.unwrap_or_default(),
        data,
    }))
}

/// The hash of the owner's tool `id`'s file (`None` when missing, not owned or without a
/// file): what names its materialized directory, read without the bytes.
pub async fn file_hash(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<String>> {
    let row = custom_tools::Entity::find_owned(owner_id, id)
        .filter(C::FileData.is_not_null())
        .select_only()
        .column(C::FileSha256)
        .into_tuple::<Option<String>>()
        .one(db)
        .await
        .map_err(db_error)?;
    Ok(row.map(Option::unwrap_or_default))
}

/// Replaces the tool's name and args; false when no row of the owner's was changed.
pub async fn update(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    tool_name: &str,
    args: &serde_json::Value,
) -> ApiResult<bool> {
    let done = custom_tools::Entity::update_owned(owner_id, id)
        .set(custom_tools::ActiveModel {
            tool_name: Set(tool_name.to_owned()),
            tool_args: Set(JsonText(args.clone())),
            updated_at: Set(chrono::Utc::now()),
            ..Default::default()
        })
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected > 0)
}

/// Deletes those of `ids` the owner has; the ids deleted.
pub async fn delete(
    db: &DatabaseConnection,
    owner_id: &str,
    ids: &[String],
) -> ApiResult<Vec<String>> {
    let mut deleted = Vec::new();
    for id in ids {
        let done = custom_tools::Entity::delete_owned(owner_id, id)
            .exec(db)
            .await
            .map_err(db_error)?;
        if done.rows_affected > 0 {
            deleted.push(id.clone());
        }
    }
    Ok(deleted)
}
