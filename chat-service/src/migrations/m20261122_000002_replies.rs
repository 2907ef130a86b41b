//! What a reply carries besides its text: metadata entries (usage_stats, prompt_raw, …) and
//! the document excerpts it was answered from.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MessageMeta {
    Table,
    Id,
    MessageId,
    InfoType,
    Content,
}

#[derive(DeriveIden)]
enum MessageReferences {
    Table,
    Id,
    MessageId,
    Rank,
    DocumentId,
    DocumentName,
    CollectionId,
    ChunkId,
    Pages,
    Score,
    Content,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(MessageMeta::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(MessageMeta::Id)
                        .big_integer()
                        .not_null()
                        .auto_increment()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(MessageMeta::MessageId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MessageMeta::InfoType)
                        .string_len(64)
                        .not_null(),
                )
                .col(ColumnDef::new(MessageMeta::Content).text().not_null())
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_message_meta_message")
                .table(MessageMeta::Table)
                .col(MessageMeta::MessageId)
                .col(MessageMeta::InfoType)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(MessageReferences::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(MessageReferences::Id)
                        .big_integer()
                        .not_null()
                        .auto_increment()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(MessageReferences::MessageId)
                        .string_len(64)
                        .not_null(),
                )
                .col(ColumnDef::new(MessageReferences::Rank).integer().not_null())
                .col(
                    ColumnDef::new(MessageReferences::DocumentId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MessageReferences::DocumentName)
                        .string_len(1024)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MessageReferences::CollectionId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MessageReferences::ChunkId)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MessageReferences::Pages)
                        .string_len(1024)
                        .not_null(),
                )
                .col(ColumnDef::new(MessageReferences::Score).double().not_null())
                .col(ColumnDef::new(MessageReferences::Content).text().not_null())
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_message_references_message")
                .table(MessageReferences::Table)
                .col(MessageReferences::MessageId)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(MessageReferences::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(MessageMeta::Table).to_owned())
            .await
    }
}
