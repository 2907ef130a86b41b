use sea_orm::entity::prelude::*;
use sea_orm::{DerivePartialModel, FromQueryResult};

use super::Owned;

/// A stored agent key, its value sealed (custom_agents::cipher).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "agent_keys")]
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
    pub name: String,
    #[sea_orm(column_type = "String(StringLen::N(16))")]
    pub key_type: String,
    #[sea_orm(column_type = "Text")]
    pub description: String,
    /// nonce ‖ ciphertext ‖ tag (ChaCha20-Poly1305).
    #[sea_orm(column_type = "Blob")]
    pub sealed: Vec<u8>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

/// A key's row without its sealed value (what answers show).
#[derive(Clone, Debug, PartialEq, Eq, DerivePartialModel, FromQueryResult)]
#[sea_orm(entity = "Entity")]
pub struct Head {
    pub id: String,
    pub owner_email: String,
    pub name: String,
    pub key_type: String,
    pub description: String,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
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
