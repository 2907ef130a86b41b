//! Completions being generated, one row per question, for the hard cap
//! chat_max_concurrent_per_user across every replica. A row lives while its replica renews
//! its lease; a replica that dies leaves rows that stop counting when the lease runs out.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ActiveCompletions {
    Table,
    QuestionId,
    UserId,
    StartedAt,
    LeaseUntil,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(ActiveCompletions::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(ActiveCompletions::QuestionId)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(ActiveCompletions::UserId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(ActiveCompletions::StartedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(ActiveCompletions::LeaseUntil)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_active_completions_user")
                .table(ActiveCompletions::Table)
                .col(ActiveCompletions::UserId)
                .col(ActiveCompletions::LeaseUntil)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(ActiveCompletions::Table).to_owned())
            .await
    }
}
