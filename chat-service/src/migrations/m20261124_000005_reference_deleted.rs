//! Whether a reference's document was deleted since the reply was stored (ingest-service's
//! `ingest.document.deleted`), for `were_references_deleted`; indexed by document for that
//! update.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MessageReferences {
    Table,
    DocumentId,
    DocumentDeleted,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(MessageReferences::Table)
                .add_column(
                    ColumnDef::new(MessageReferences::DocumentDeleted)
                        .boolean()
                        .not_null()
                        .default(false),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_message_references_document")
                .table(MessageReferences::Table)
                .col(MessageReferences::DocumentId)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(
            Index::drop()
                .name("idx_message_references_document")
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(MessageReferences::Table)
                .drop_column(MessageReferences::DocumentDeleted)
                .to_owned(),
        )
        .await
    }
}
