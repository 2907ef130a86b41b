//! Workspace files: which document holds each file of a session's workspace (the workspace's
//! manifest). Shared by every replica, so a turn on any replica restores the workspace from
//! the documents and knows which files changed. And session_deletions: the deletions of a
//! session's files under way, with a lease (a second deletion meanwhile is a 409).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum WorkspaceFiles {
    Table,
    SessionId,
    Path,
    DocumentId,
    Sha256,
    Size,
    QuestionId,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum SessionDeletions {
    Table,
    SessionId,
    Until,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(WorkspaceFiles::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(WorkspaceFiles::SessionId)
                        .string_len(128)
                        .not_null(),
                )
                .col(ColumnDef::new(WorkspaceFiles::Path).text().not_null())
                .col(
                    ColumnDef::new(WorkspaceFiles::DocumentId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(WorkspaceFiles::Sha256)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(WorkspaceFiles::Size)
                        .big_integer()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(WorkspaceFiles::QuestionId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(WorkspaceFiles::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .primary_key(
                    Index::create()
                        .col(WorkspaceFiles::SessionId)
                        .col(WorkspaceFiles::Path),
                )
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(SessionDeletions::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(SessionDeletions::SessionId)
                        .string_len(128)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(SessionDeletions::Until)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(SessionDeletions::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(WorkspaceFiles::Table).to_owned())
            .await
    }
}
