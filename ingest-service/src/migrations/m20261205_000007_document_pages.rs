//! Each document's parsed text by page (issue 41: an MCP client reads a document by page).
//! Documents from before have no rows; their text is rebuilt from their chunks
//! (`crate::document_text`).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DocumentPages {
    Table,
    DocumentId,
    Page,
    Text,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(DocumentPages::Table)
                .if_not_exists()
                .col(ColumnDef::new(DocumentPages::DocumentId).text().not_null())
                .col(ColumnDef::new(DocumentPages::Page).integer().not_null())
                .col(ColumnDef::new(DocumentPages::Text).text().not_null())
                .primary_key(
                    Index::create()
                        .col(DocumentPages::DocumentId)
                        .col(DocumentPages::Page),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(DocumentPages::Table).to_owned())
            .await
    }
}
