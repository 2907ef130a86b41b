//! The caller's custom tools as custom agents see them (the MCP servers they may be
//! associated with), read through custom_tools' store.

use docchat_common::error::ApiResult;
use sea_orm::DatabaseConnection;

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

/// The custom tools of `owner_id` (custom_tools' own store).
pub async fn of_owner(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<ToolRow>> {
    let mut rows: Vec<ToolRow> = crate::custom_tools::store::list(db, owner_id)
        .await?
        .into_iter()
        .map(|r| ToolRow {
            tool_args: r.args.to_string(),
            id: r.id,
            tool_name: r.tool_name,
            tool_type: r.tool_type.as_str().to_owned(),
            owner_email: r.owner_email,
        })
        .collect();
    rows.sort_by(|a, b| (&a.tool_name, &a.id).cmp(&(&b.tool_name, &b.id)));
    Ok(rows)
}
