//! Scheduled tasks and their executions (AGENTS.md §5). Due tasks are found by
//! `(status, next_execution_at)`; an execution is unique per task and due time, so however
//! many replicas claim, a due time runs once.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ScheduledTasks {
    Table,
    Id,
    UserId,
    Username,
    Name,
    Description,
    ScheduleType,
    ScheduleExpression,
    TaskType,
    TaskConfig,
    CollectionId,
    Status,
    ExecutionStatus,
    LastExecutionAt,
    NextExecutionAt,
    ExecutionCount,
    MaxExecutions,
    ExpiresAt,
    NotificationEmail,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum TaskExecutions {
    Table,
    Id,
    TaskId,
    UserId,
    Username,
    TaskName,
    Status,
    TriggerSource,
    ScheduledFor,
    StartedAt,
    CompletedAt,
    LeaseUntil,
    Worker,
    ChatSessionId,
    ResultSummary,
    ErrorMessage,
    CreatedAt,
}

fn text<T: IntoIden>(c: T, len: u32) -> ColumnDef {
    ColumnDef::new(c).string_len(len).not_null().to_owned()
}

fn at<T: IntoIden>(c: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(c);
    def.timestamp_with_time_zone();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        use ScheduledTasks as T;
        m.create_table(
            Table::create()
                .table(T::Table)
                .if_not_exists()
                .col(text(T::Id, 64).primary_key())
                .col(text(T::UserId, 64))
                .col(text(T::Username, 255))
                .col(text(T::Name, 255))
                .col(ColumnDef::new(T::Description).text().not_null())
                .col(text(T::ScheduleType, 16))
                .col(text(T::ScheduleExpression, 255))
                .col(text(T::TaskType, 32))
                .col(ColumnDef::new(T::TaskConfig).text().not_null())
                .col(text(T::CollectionId, 64))
                .col(text(T::Status, 16))
                .col(text(T::ExecutionStatus, 16))
                .col(at(T::LastExecutionAt, true))
                .col(at(T::NextExecutionAt, true))
                .col(ColumnDef::new(T::ExecutionCount).big_integer().not_null())
                .col(ColumnDef::new(T::MaxExecutions).big_integer().null())
                .col(at(T::ExpiresAt, true))
                .col(text(T::NotificationEmail, 320))
                .col(at(T::CreatedAt, false))
                .col(at(T::UpdatedAt, false))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("uq_scheduled_tasks_user_name")
                .table(T::Table)
                .col(T::UserId)
                .col(T::Name)
                .unique()
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_scheduled_tasks_due")
                .table(T::Table)
                .col(T::Status)
                .col(T::NextExecutionAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;

        use TaskExecutions as E;
        m.create_table(
            Table::create()
                .table(E::Table)
                .if_not_exists()
                .col(text(E::Id, 64).primary_key())
                .col(text(E::TaskId, 64))
                .col(text(E::UserId, 64))
                .col(text(E::Username, 255))
                .col(text(E::TaskName, 255))
                .col(text(E::Status, 16))
                .col(text(E::TriggerSource, 16))
                .col(at(E::ScheduledFor, false))
                .col(at(E::StartedAt, true))
                .col(at(E::CompletedAt, true))
                .col(at(E::LeaseUntil, true))
                .col(text(E::Worker, 128))
                .col(text(E::ChatSessionId, 64))
                .col(ColumnDef::new(E::ResultSummary).text().not_null())
                .col(ColumnDef::new(E::ErrorMessage).text().not_null())
                .col(at(E::CreatedAt, false))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("uq_task_executions_due")
                .table(E::Table)
                .col(E::TaskId)
                .col(E::ScheduledFor)
                .unique()
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_task_executions_user")
                .table(E::Table)
                .col(E::UserId)
                .col(E::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_task_executions_lease")
                .table(E::Table)
                .col(E::Status)
                .col(E::LeaseUntil)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(TaskExecutions::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(ScheduledTasks::Table).to_owned())
            .await
    }
}
