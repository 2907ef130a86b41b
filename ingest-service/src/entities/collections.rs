use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "collections")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub owner_id: String,
    pub owner_username: String,
    pub name: String,
    pub description: String,
    pub embedding_model: String,
    pub is_public: bool,
    pub status: String,
    pub document_count: i64,
    pub document_size: i64,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub description_auto_generated: bool,
    pub description_generated_at: Option<ChronoDateTimeUtc>,
    pub description_dirty_at: Option<ChronoDateTimeUtc>,
    pub description_generation_started_at: Option<ChronoDateTimeUtc>,
    /// Bumped whenever the collection's chunks change.
    pub index_version: i64,
    /// JSON object: the client's CollectionSettings (`crate::collection_settings`).
    pub collection_settings: Option<String>,
    /// JSON object: the client's ChatSettings, kept for the client.
    pub chat_settings: Option<String>,
    /// JSON object: the collection's metadata, any keys.
    pub metadata: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
