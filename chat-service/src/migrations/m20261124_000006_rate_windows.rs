//! The shared chat rate limit (rate.rs): requests per user and minute window, for every
//! replica together.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ChatRateWindows {
    Table,
    UserId,
    /// Unix minutes.
    WindowStart,
    N,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(ChatRateWindows::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(ChatRateWindows::UserId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(ChatRateWindows::WindowStart)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(ChatRateWindows::N)
                        .big_integer()
                        .not_null()
                        .default(0),
                )
                .primary_key(
                    Index::create()
                        .col(ChatRateWindows::UserId)
                        .col(ChatRateWindows::WindowStart),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_chat_rate_windows_start")
                .table(ChatRateWindows::Table)
                .col(ChatRateWindows::WindowStart)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(ChatRateWindows::Table).to_owned())
            .await
    }
}
