use sea_orm::entity::prelude::*;

/// Only the SHA-256 of a secret is stored; `hint` shows its last characters.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub user_id: String,
    pub name: String,
    #[sea_orm(unique)]
    pub key_hash: String,
    pub hint: String,
    pub created_at: ChronoDateTimeUtc,
    pub expires_at: Option<ChronoDateTimeUtc>,
    pub last_used_at: Option<ChronoDateTimeUtc>,
    pub total_calls: i64,
    pub is_active: bool,
    /// Days without a call after which the key stops working; `None`: never.
    pub inactivity_days: Option<i32>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
