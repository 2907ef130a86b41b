use sea_orm::entity::prelude::*;

use super::JsonText;

/// The tools a user wants when agent_tools is `auto`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tool_preferences")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(64))"
    )]
    pub user_id: String,
    /// A JSON list of tool names.
    #[sea_orm(column_type = "Text")]
    pub tools: JsonText<Vec<String>>,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
