use sea_orm::entity::prelude::*;

/// A document excerpt a reply was answered from, in the order it was given to the model.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "message_references")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub message_id: String,
    pub rank: i32,
    pub document_id: String,
    pub document_name: String,
    pub collection_id: String,
    pub chunk_id: i64,
    /// Comma-separated page numbers.
    pub pages: String,
    pub score: f64,
    pub content: String,
    /// The document was deleted after the reply was stored (`ingest.document.deleted`).
    pub document_deleted: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
