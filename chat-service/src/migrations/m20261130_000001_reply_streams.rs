//! Replies a client can come back to (marks.rs): where each streamed line of a reply ends,
//! written with its progress while it is generated and kept with the stored reply; and the
//! compatible API's background responses, kept for `chat_stream_retention_seconds` after
//! they end.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ActiveCompletions {
    Table,
    Marks,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    StreamMarks,
}

#[derive(DeriveIden)]
enum BackgroundResponses {
    Table,
    Id,
    OwnerId,
    Model,
    Status,
    Head,
    Progress,
    Marks,
    Usage,
    Error,
    CreatedAt,
    LeaseUntil,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column a statement: SQLite alters one at a time.
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .add_column(ColumnDef::new(ActiveCompletions::Marks).text().null())
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(Messages::Table)
                .add_column(ColumnDef::new(Messages::StreamMarks).text().null())
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(BackgroundResponses::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(BackgroundResponses::Id)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(BackgroundResponses::OwnerId)
                        .string_len(64)
                        .not_null(),
                )
                .col(ColumnDef::new(BackgroundResponses::Model).text().not_null())
                .col(
                    ColumnDef::new(BackgroundResponses::Status)
                        .string_len(16)
                        .not_null(),
                )
                .col(ColumnDef::new(BackgroundResponses::Head).text().not_null())
                .col(
                    ColumnDef::new(BackgroundResponses::Progress)
                        .text()
                        .not_null(),
                )
                .col(ColumnDef::new(BackgroundResponses::Marks).text().not_null())
                .col(ColumnDef::new(BackgroundResponses::Usage).text().null())
                .col(ColumnDef::new(BackgroundResponses::Error).text().null())
                .col(
                    ColumnDef::new(BackgroundResponses::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(BackgroundResponses::LeaseUntil)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(BackgroundResponses::ExpiresAt)
                        .timestamp_with_time_zone()
                        .null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_background_responses_expiry")
                .table(BackgroundResponses::Table)
                .col(BackgroundResponses::ExpiresAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_background_responses_lease")
                .table(BackgroundResponses::Table)
                .col(BackgroundResponses::Status)
                .col(BackgroundResponses::LeaseUntil)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(
            Table::drop()
                .table(BackgroundResponses::Table)
                .if_exists()
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(Messages::Table)
                .drop_column(Messages::StreamMarks)
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .drop_column(ActiveCompletions::Marks)
                .to_owned(),
        )
        .await
    }
}
