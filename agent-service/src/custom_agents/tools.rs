//! The caller's custom tools as custom agents see them: rows of ext-tools' `custom_tools`
//! table, read with a small query of our own (so this module does not depend on
//! custom_tools/). Without the table (a replica before that migration) there are none.

use docchat_common::error::ApiResult;
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::preferences::stmt;

/// One custom tool of the caller's.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRow {
    pub id: String,
    pub tool_name: String,
    pub tool_type: String,
    /// tool_args as stored (a JSON object's text).
    pub tool_args: String,
    pub owner_email: String,
}

impl ToolRow {
    /// tool_args.description, if any.
    pub fn description(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.tool_args)
            .ok()
            .and_then(|v| {
                v.get("description")
                    .and_then(|d| d.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }
}

/// The custom tools of `owner_id`.
pub async fn of_owner(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<ToolRow>> {
    let rows = match db
        .query_all(stmt(
            db,
            "SELECT id, tool_name, tool_type, tool_args, owner_email FROM custom_tools WHERE owner_id = ? ORDER BY tool_name, id",
            vec![owner_id.into()],
        ))
        .await
    {
        Ok(rows) => rows,
        Err(e) => {
            tracing::debug!(error = %e, "custom tools unreadable; custom agents see none");
            return Ok(Vec::new());
        }
    };
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some(ToolRow {
                id: r.try_get("", "id").ok()?,
                tool_name: r.try_get("", "tool_name").ok()?,
                tool_type: r.try_get("", "tool_type").ok()?,
                tool_args: r.try_get("", "tool_args").ok()?,
                owner_email: r.try_get("", "owner_email").ok()?,
            })
        })
        .collect())
}
