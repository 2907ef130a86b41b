use sea_orm::entity::prelude::*;

/// A searchable piece of a document with its embedding (little-endian f32).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "chunks")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub document_id: String,
    pub collection_id: String,
    pub chunk_index: i32,
    pub text: String,
    /// Comma-separated page numbers.
    pub pages: String,
    /// Where each page's part of the text starts (`crate::pages`); `None` for a chunk of one
    /// page and on rows from before they were kept.
    pub page_starts: Option<String>,
    pub heading: Option<String>,
    pub start_time: Option<f64>,
    pub end_time: Option<f64>,
    pub embedding: Vec<u8>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
