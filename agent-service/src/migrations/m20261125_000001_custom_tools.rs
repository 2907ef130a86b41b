//! Custom tools (issue 16): one row per tool, with the uploaded file's bytes, so that every
//! replica can materialize the tool's files on its own disk when a run opens it.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum CustomTools {
    Table,
    Id,
    OwnerId,
    OwnerEmail,
    ToolName,
    ToolType,
    ToolArgs,
    FileName,
    FileData,
    FileSha256,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(CustomTools::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(CustomTools::Id)
                        .string_len(36)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(CustomTools::OwnerId)
                        .string_len(64)
                        .not_null(),
                )
                .col(ColumnDef::new(CustomTools::OwnerEmail).text().not_null())
                .col(ColumnDef::new(CustomTools::ToolName).text().not_null())
                .col(
                    ColumnDef::new(CustomTools::ToolType)
                        .string_len(32)
                        .not_null(),
                )
                // A JSON object.
                .col(ColumnDef::new(CustomTools::ToolArgs).text().not_null())
                .col(ColumnDef::new(CustomTools::FileName).text().null())
                // The upload as sent (≤ 20 MB); NULL without a file.
                .col(ColumnDef::new(CustomTools::FileData).binary().null())
                .col(
                    ColumnDef::new(CustomTools::FileSha256)
                        .string_len(64)
                        .null(),
                )
                .col(
                    ColumnDef::new(CustomTools::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(CustomTools::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("custom_tools_owner")
                .table(CustomTools::Table)
                .col(CustomTools::OwnerId)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(CustomTools::Table).to_owned())
            .await
    }
}
