use sea_orm::entity::prelude::*;

/// A user's lifetime LLM usage, kept beside the ledger so the lifetime cap is one row read.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "llm_usage_totals")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: String,
    pub cost: f64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
