use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "documents")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub owner_id: String,
    pub owner_username: String,
    pub collection_id: String,
    pub name: String,
    pub kind: String,
    pub size: i64,
    pub page_count: i64,
    pub status: String,
    pub upload_id: Option<String>,
    pub chat_session_id: Option<String>,
    pub summary: Option<String>,
    /// JSON array of suggested questions.
    pub questions: Option<String>,
    /// JSON array of audio segments (transcripts only).
    pub segments: Option<String>,
    /// JSON object: page number → how it was read (`text`, `tesseract`, `failed`); set
    /// when a page needed text recognition.
    pub page_sources: Option<String>,
    /// Which pages could not be read, and why.
    pub message: Option<String>,
    /// JSON object: the document's metadata, any keys (PUT /documents/{id}/metadata).
    pub metadata: Option<String>,
    /// Where the document came from, as its owner last set it.
    pub uri: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
