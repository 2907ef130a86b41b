//! The job history: one row per job, fed by `job.*` events. `status_rank` orders the
//! statuses (queued < running < terminal) so a late event cannot move a row backwards in
//! one conditional update.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum JobHistory {
    Table,
    Id,
    Name,
    Kind,
    Username,
    UserId,
    Status,
    StatusRank,
    Progress,
    Errors,
    CollectionId,
    CollectionName,
    CanceledBy,
    CancelReason,
    CreatedAt,
    UpdatedAt,
    StartedAt,
    FinishedAt,
    DeletedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let text =
            |c: JobHistory, len: u32| ColumnDef::new(c).string_len(len).not_null().to_owned();
        let at = |c: JobHistory| {
            ColumnDef::new(c)
                .timestamp_with_time_zone()
                .null()
                .to_owned()
        };
        m.create_table(
            Table::create()
                .table(JobHistory::Table)
                .if_not_exists()
                .col(text(JobHistory::Id, 64).primary_key())
                .col(text(JobHistory::Name, 255))
                .col(text(JobHistory::Kind, 64))
                .col(text(JobHistory::Username, 255))
                .col(text(JobHistory::UserId, 64))
                .col(text(JobHistory::Status, 32))
                .col(ColumnDef::new(JobHistory::StatusRank).integer().not_null())
                .col(ColumnDef::new(JobHistory::Progress).double().not_null())
                .col(ColumnDef::new(JobHistory::Errors).text().not_null())
                .col(text(JobHistory::CollectionId, 64))
                .col(text(JobHistory::CollectionName, 255))
                .col(ColumnDef::new(JobHistory::CanceledBy).string_len(64).null())
                .col(ColumnDef::new(JobHistory::CancelReason).text().null())
                .col(
                    ColumnDef::new(JobHistory::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(JobHistory::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(at(JobHistory::StartedAt))
                .col(at(JobHistory::FinishedAt))
                .col(at(JobHistory::DeletedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_job_history_created")
                .table(JobHistory::Table)
                .col(JobHistory::CreatedAt)
                .col(JobHistory::Id)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(JobHistory::Table).to_owned())
            .await
    }
}
