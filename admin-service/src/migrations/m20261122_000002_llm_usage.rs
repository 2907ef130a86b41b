//! The LLM cost ledger: one row per `usage.llm` event (keyed by the event id, so a
//! redelivered event is counted once) and a running lifetime total per user.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LlmUsage {
    Table,
    EventId,
    UserId,
    Model,
    Purpose,
    MessageId,
    PromptTokens,
    CompletionTokens,
    Cost,
    CreatedAt,
}

#[derive(DeriveIden)]
enum LlmUsageTotals {
    Table,
    UserId,
    Cost,
    PromptTokens,
    CompletionTokens,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(LlmUsage::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(LlmUsage::EventId)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(ColumnDef::new(LlmUsage::UserId).string_len(64).not_null())
                .col(ColumnDef::new(LlmUsage::Model).string_len(255).not_null())
                .col(ColumnDef::new(LlmUsage::Purpose).string_len(64).not_null())
                .col(
                    ColumnDef::new(LlmUsage::MessageId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(LlmUsage::PromptTokens)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(LlmUsage::CompletionTokens)
                        .big_integer()
                        .not_null(),
                )
                .col(ColumnDef::new(LlmUsage::Cost).double().not_null())
                .col(
                    ColumnDef::new(LlmUsage::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_llm_usage_user_time")
                .table(LlmUsage::Table)
                .col(LlmUsage::UserId)
                .col(LlmUsage::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(LlmUsageTotals::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(LlmUsageTotals::UserId)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(ColumnDef::new(LlmUsageTotals::Cost).double().not_null())
                .col(
                    ColumnDef::new(LlmUsageTotals::PromptTokens)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(LlmUsageTotals::CompletionTokens)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(LlmUsageTotals::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(LlmUsageTotals::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(LlmUsage::Table).to_owned())
            .await
    }
}
