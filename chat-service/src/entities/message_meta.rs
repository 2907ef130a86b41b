use sea_orm::entity::prelude::*;

/// One metadata entry of a reply (`usage_stats`, `prompt_raw`, …).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "message_meta")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub message_id: String,
    pub info_type: String,
    pub content: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
