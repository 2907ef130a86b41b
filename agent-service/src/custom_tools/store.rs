//! The custom_tools table: one row per tool with the uploaded bytes (so any replica can
//! materialize its files). Every read and write is scoped to the owner: another user's
//! tool does not exist for the caller.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, Value};
use sha2::{Digest, Sha256};

use crate::preferences::stmt;
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

const COLUMNS: &str = "id, owner_id, owner_email, tool_name, tool_type, tool_args, file_name";

fn record(row: &QueryResult) -> ApiResult<ToolRecord> {
    let text: String = row.try_get("", "tool_args").map_err(db_error)?;
    let kind: String = row.try_get("", "tool_type").map_err(db_error)?;
    Ok(ToolRecord {
        id: row.try_get("", "id").map_err(db_error)?,
        owner_id: row.try_get("", "owner_id").map_err(db_error)?,
        owner_email: row.try_get("", "owner_email").map_err(db_error)?,
        tool_name: row.try_get("", "tool_name").map_err(db_error)?,
        tool_type: ToolType::parse(&kind)
            .ok_or_else(|| ApiError::internal("custom tools", format!("tool_type {kind}")))?,
        args: serde_json::from_str(&text).unwrap_or_else(|_| serde_json::json!({})),
        file_name: row.try_get("", "file_name").map_err(db_error)?,
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
        tx.execute(stmt(
            db,
            "INSERT INTO custom_tools (id, owner_id, owner_email, tool_name, tool_type, tool_args, \
             file_name, file_data, file_sha256, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                id.clone().into(),
                owner_id.into(),
                owner_email.into(),
                t.tool_name.into(),
                t.tool_type.as_str().into(),
                t.args.to_string().into(),
                t.file_name.into(),
                Value::Bytes(t.file.map(Box::new)),
                sha.into(),
                now.into(),
                now.into(),
            ],
        ))
        .await
        .map_err(db_error)?;
        ids.push(id);
    }
    tx.commit().await.map_err(db_error)?;
    Ok(ids)
}

/// The owner's tools, oldest first.
pub async fn list(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<ToolRecord>> {
    let rows = db
        .query_all(stmt(
            db,
            &format!(
                "SELECT {COLUMNS} FROM custom_tools WHERE owner_id = ? ORDER BY created_at, id"
            ),
            vec![owner_id.into()],
        ))
        .await
        .map_err(db_error)?;
    rows.iter().map(record).collect()
}

/// The owner's tool `id`; `None` when missing or another user's.
pub async fn get(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<ToolRecord>> {
    let row = db
        .query_one(stmt(
            db,
            &format!("SELECT {COLUMNS} FROM custom_tools WHERE id = ? AND owner_id = ?"),
            vec![id.into(), owner_id.into()],
        ))
        .await
        .map_err(db_error)?;
    row.as_ref().map(record).transpose()
}

/// The uploaded file of the owner's tool `id`; `None` when missing, not owned or without
/// a file.
pub async fn file(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<StoredFile>> {
    let row = db
        .query_one(stmt(
            db,
            "SELECT file_name, file_data, file_sha256 FROM custom_tools \
             WHERE id = ? AND owner_id = ? AND file_data IS NOT NULL",
            vec![id.into(), owner_id.into()],
        ))
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(StoredFile {
        name: row
            .try_get::<Option<String>>("", "file_name")
            .map_err(db_error)?
            .unwrap_or_default(),
        sha256: row
            .try_get::<Option<String>>("", "file_sha256")
            .map_err(db_error)?
            .unwrap_or_default(),
        data: row.try_get("", "file_data").map_err(db_error)?,
    }))
}

/// The hash of the owner's tool `id`'s file (`None` when missing, not owned or without a
/// file): what names its materialized directory, read without the bytes.
pub async fn file_hash(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
) -> ApiResult<Option<String>> {
    let row = db
        .query_one(stmt(
            db,
            "SELECT file_sha256 FROM custom_tools \
             WHERE id = ? AND owner_id = ? AND file_data IS NOT NULL",
            vec![id.into(), owner_id.into()],
        ))
        .await
        .map_err(db_error)?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(
            r.try_get::<Option<String>>("", "file_sha256")
                .map_err(db_error)?
                .unwrap_or_default(),
        )),
    }
}

/// Replaces the tool's name and args; false when no row of the owner's was changed.
pub async fn update(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    tool_name: &str,
    args: &serde_json::Value,
) -> ApiResult<bool> {
    let done = db
        .execute(stmt(
            db,
            "UPDATE custom_tools SET tool_name = ?, tool_args = ?, updated_at = ? \
             WHERE id = ? AND owner_id = ?",
            vec![
                tool_name.into(),
                args.to_string().into(),
                chrono::Utc::now().into(),
                id.into(),
                owner_id.into(),
            ],
        ))
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected() > 0)
}

/// Deletes those of `ids` the owner has; the ids deleted.
pub async fn delete(
    db: &DatabaseConnection,
    owner_id: &str,
    ids: &[String],
) -> ApiResult<Vec<String>> {
    let mut deleted = Vec::new();
    for id in ids {
        let done = db
            .execute(stmt(
                db,
                "DELETE FROM custom_tools WHERE id = ? AND owner_id = ?",
                vec![id.as_str().into(), owner_id.into()],
            ))
            .await
            .map_err(db_error)?;
        if done.rows_affected() > 0 {
            deleted.push(id.clone());
        }
    }
    Ok(deleted)
}
