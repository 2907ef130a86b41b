use sea_orm::entity::prelude::*;
use sea_orm::{DerivePartialModel, FromQueryResult};

use super::{JsonText, Owned};

/// A custom agent a user uploaded, with its folder's bytes.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "custom_agents")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(64))"
    )]
    pub id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub owner_id: String,
    #[sea_orm(column_type = "Text")]
    pub owner_email: String,
    #[sea_orm(column_type = "String(StringLen::N(255))")]
    pub agent_name: String,
    #[sea_orm(column_type = "String(StringLen::N(32))")]
    pub agent_type: String,
    /// A JSON object.
    #[sea_orm(column_type = "Text")]
    pub agent_args: JsonText<serde_json::Value>,
    #[sea_orm(column_type = "Text")]
    pub description: String,
    /// metadata.json's mcp_servers.
    #[sea_orm(column_type = "Text")]
    pub mcp_servers: JsonText<Vec<Declared>>,
    /// The command metadata.json names.
    #[sea_orm(column_type = "Text")]
    pub command: JsonText<Vec<String>>,
    /// A ZIP of the agent's folder alone.
    #[sea_orm(column_type = "Blob")]
    pub folder: Vec<u8>,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub folder_sha256: String,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

/// An agent's row without its folder's bytes.
#[derive(Clone, Debug, PartialEq, DerivePartialModel, FromQueryResult)]
#[sea_orm(entity = "Entity")]
pub struct Head {
    pub id: String,
    pub owner_id: String,
    pub owner_email: String,
    pub agent_name: String,
    pub agent_type: String,
    pub agent_args: JsonText<serde_json::Value>,
    pub description: String,
    pub mcp_servers: JsonText<Vec<Declared>>,
    pub command: JsonText<Vec<String>>,
    pub folder_sha256: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Owned for Entity {
    fn owner_column() -> Column {
        Column::OwnerId
    }

    fn id_column() -> Column {
        Column::Id
    }
}

/// A declared MCP server, as stored in `mcp_servers`: its name and the declaration's
/// arguments.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Declared {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}
