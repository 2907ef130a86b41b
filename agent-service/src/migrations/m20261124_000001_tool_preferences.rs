//! Tool preferences: the tools a user wants when agent_tools is `auto`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ToolPreferences {
    Table,
    UserId,
    Tools,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(ToolPreferences::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(ToolPreferences::UserId)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                // A JSON list of tool names.
                .col(ColumnDef::new(ToolPreferences::Tools).text().not_null())
                .col(
                    ColumnDef::new(ToolPreferences::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(ToolPreferences::Table).to_owned())
            .await
    }
}
