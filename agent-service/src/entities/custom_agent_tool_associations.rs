use sea_orm::entity::prelude::*;

use super::Owned;

/// A custom agent's MCP server → the user's custom tool that serves it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "custom_agent_tool_associations")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(64))"
    )]
    pub id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub agent_id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub owner_id: String,
    #[sea_orm(column_type = "String(StringLen::N(255))")]
    pub mcp_server_name: String,
    /// `None`: unresolved.
    #[sea_orm(column_type = "String(StringLen::N(64))", nullable)]
    pub tool_id: Option<String>,
    pub created_at: ChronoDateTimeUtc,
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
