//! The rows an execution changes: its own, and the task's execution_status, which goes back
//! to idle when the task's last running execution ends. Each change runs in a transaction that
//! first locks the task row on PostgreSQL (SQLite has one writer), so two executions of a task
//! ending together cannot both see the other still running.

use chrono::{DateTime, Utc};
use docchat_common::error::{ApiResult, error_line};
use docchat_common::time::now;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait,
    QueryFilter,
};

pub(super) use crate::tasks::lock_task;

use super::events;
use super::status::{ACTIVE, CANCELLED, COMPLETED, FAILED, IDLE, PAUSED, RUNNING};
use crate::entities::{scheduled_tasks as tasks, task_executions as executions};

/// The longest result_summary kept (characters); the whole answer stays in the chat session.
pub const SUMMARY_CHARS: usize = 4000;

/// How an execution ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The answer.
    Completed(String),
    /// Why it failed (one line is kept).
    Failed(String),
    /// Its replica stopped renewing the lease.
    Lapsed,
}

/// What the replica running it stopped with (the reaper's error text).
pub const LAPSED: &str = "the scheduler replica running it stopped";

/// Sets the task idle when none of its executions runs any more.
pub(super) async fn idle_if_done<C: ConnectionTrait>(conn: &C, task_id: &str) -> Result<(), DbErr> {
    let running = executions::Entity::find()
        .filter(executions::Column::TaskId.eq(task_id))
        .filter(executions::Column::Status.eq(RUNNING))
        .count(conn)
        .await?;
    if running == 0 {
        tasks::Entity::update_many()
            .col_expr(tasks::Column::ExecutionStatus, Expr::value(IDLE))
            .filter(tasks::Column::Id.eq(task_id))
            .exec(conn)
            .await?;
    }
    Ok(())
}

/// Pauses an active task (its collection is gone): it keeps its next time, as a pause by its
/// owner does, and resuming recomputes it.
pub(super) async fn pause<C: ConnectionTrait>(conn: &C, task_id: &str) -> Result<(), DbErr> {
    tasks::Entity::update_many()
        .col_expr(tasks::Column::Status, Expr::value(PAUSED))
        .col_expr(
            tasks::Column::UpdatedAt,
            Expr::value(docchat_common::time::now()),
        )
        .filter(tasks::Column::Id.eq(task_id))
        .filter(tasks::Column::Status.eq(ACTIVE))
        .exec(conn)
        .await?;
    Ok(())
}

/// Records the chat session of a running execution.
pub(super) async fn set_session(
    db: &DatabaseConnection,
    execution_id: &str,
    session_id: &str,
) -> ApiResult<()> {
    executions::Entity::update_many()
        .col_expr(
            executions::Column::ChatSessionId,
            Expr::value(session_id.to_owned()),
        )
        .filter(executions::Column::Id.eq(execution_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The first `SUMMARY_CHARS` characters of the trimmed answer.
pub fn summary(answer: &str) -> String {
    answer.trim().chars().take(SUMMARY_CHARS).collect()
}

/// Ends a running execution with `outcome` (a no-op when it is no longer running: the reaper
/// or a delete came first); the task goes idle if it was its last running one, and the job
/// event goes out. Returns the ended execution and its task's notification address.
pub(super) async fn finish(
    db: &DatabaseConnection,
    execution_id: &str,
    outcome: Outcome,
    lapsed_before: Option<DateTime<Utc>>,
) -> ApiResult<Option<(executions::Model, String)>> {
    let txn = docchat_common::db::begin(db).await?;
    let Some(execution) = executions::Entity::find_by_id(execution_id.to_owned())
        .one(&txn)
        .await?
    else {
        return Ok(None);
    };
    let task = lock_task(&txn, &execution.task_id).await?;
    let at = now();
    let (status, summary_text, error, event) = match &outcome {
        Outcome::Completed(answer) => (COMPLETED, summary(answer), String::new(), COMPLETED),
        Outcome::Failed(e) => (FAILED, String::new(), error_line(e), FAILED),
        Outcome::Lapsed => (FAILED, String::new(), LAPSED.to_owned(), "stale"),
    };
    let mut update = executions::Entity::update_many()
        .col_expr(executions::Column::Status, Expr::value(status))
        .col_expr(executions::Column::CompletedAt, Expr::value(at))
        .col_expr(
            executions::Column::LeaseUntil,
            Expr::value(None::<DateTime<Utc>>),
        )
        .col_expr(
            executions::Column::ResultSummary,
            Expr::value(summary_text.clone()),
        )
        .col_expr(executions::Column::ErrorMessage, Expr::value(error.clone()))
        .filter(executions::Column::Id.eq(execution_id))
        .filter(executions::Column::Status.eq(RUNNING));
    if let Some(before) = lapsed_before {
        update = update.filter(executions::Column::LeaseUntil.lt(before));
    }
    if update.exec(&txn).await?.rows_affected == 0 {
        txn.rollback().await?;
        return Ok(None);
    }
    idle_if_done(&txn, &execution.task_id).await?;
    let ended = executions::Model {
        status: status.to_owned(),
        completed_at: Some(at),
        lease_until: None,
        result_summary: summary_text,
        error_message: error,
        ..execution
    };
    let (collection_id, email) = task
        .map(|t| (t.collection_id, t.notification_email))
        .unwrap_or_default();
    events::announce(&txn, &ended, &collection_id, event).await?;
    txn.commit().await?;
    Ok(Some((ended, email)))
}

/// Cancels `execution` if it is still running (in the caller's transaction, which holds its
/// task): it ends `cancelled` now with the one-line reason, and the task goes idle if it was
/// its last running one. The ended execution, or `None` when it had already ended.
pub(super) async fn cancel<C: ConnectionTrait>(
    conn: &C,
    execution: &executions::Model,
    by: &str,
    reason: &str,
) -> Result<Option<executions::Model>, DbErr> {
    let at = now();
    let error = error_line(&format!("canceled by {by}: {reason}"));
    let changed = executions::Entity::update_many()
        .col_expr(executions::Column::Status, Expr::value(CANCELLED))
        .col_expr(executions::Column::CompletedAt, Expr::value(at))
        .col_expr(
            executions::Column::LeaseUntil,
            Expr::value(None::<DateTime<Utc>>),
        )
        .col_expr(executions::Column::ErrorMessage, Expr::value(error.clone()))
        .filter(executions::Column::Id.eq(execution.id.as_str()))
        .filter(executions::Column::Status.eq(RUNNING))
        .exec(conn)
        .await?
        .rows_affected;
    if changed == 0 {
        return Ok(None);
    }
    idle_if_done(conn, &execution.task_id).await?;
    Ok(Some(executions::Model {
        status: CANCELLED.to_owned(),
        completed_at: Some(at),
        lease_until: None,
        error_message: error,
        ..execution.clone()
    }))
}
