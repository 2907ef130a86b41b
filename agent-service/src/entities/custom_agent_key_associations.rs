use sea_orm::entity::prelude::*;

use super::Owned;

/// A custom agent's declared environment key → the user's stored key given for it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "custom_agent_key_associations")]
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
    pub env_key_name: String,
    /// `None`: declared in envs.json, no key given yet.
    #[sea_orm(column_type = "String(StringLen::N(64))", nullable)]
    pub key_id: Option<String>,
    #[sea_orm(column_type = "String(StringLen::N(32))")]
    pub requirement_type: String,
    /// envs.json's default for optional_with_default.
    #[sea_orm(column_type = "Text", nullable)]
    pub default_value: Option<String>,
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
