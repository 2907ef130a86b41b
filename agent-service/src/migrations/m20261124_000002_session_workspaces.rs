//! Session workspaces: whose each session's workspace is (sessions belong to chat-service;
//! a run records its session here when it starts), and the session's preview for the global
//! directory stats.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SessionWorkspaces {
    Table,
    SessionId,
    UserId,
    ChatPreview,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(SessionWorkspaces::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(SessionWorkspaces::SessionId)
                        .string_len(128)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(SessionWorkspaces::UserId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(SessionWorkspaces::ChatPreview)
                        .text()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(SessionWorkspaces::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(SessionWorkspaces::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_session_workspaces_user")
                .table(SessionWorkspaces::Table)
                .col(SessionWorkspaces::UserId)
                .col(SessionWorkspaces::UpdatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(SessionWorkspaces::Table).to_owned())
            .await
    }
}
