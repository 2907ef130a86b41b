//! Claims (AGENTS.md §5): every tick a replica takes due tasks — `status = 'active' AND
//! next_execution_at <= now` — one at a time, each in one transaction that locks the row
//! (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas never wait on each other's claims),
//! inserts the execution, whose `(task_id, scheduled_for)` key makes a second claim of one due
//! time a no-op (the task still moves past it), and advances the task by a conditional update
//! (it only applies while the task is still due at the time read, which is the whole claim on
//! SQLite; when it does not apply, the claim is rolled back).
//!
//! A task's next time is the schedule's first after max(due, now): a replica that was down
//! runs a missed time once, not a burst. A once task or one at max_executions completes; a
//! next time past expires_at expires the task, and a claim after expires_at (a due time past
//! it, or a missed one the replicas were down for) expires the task without running.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use docchat_common::error::ApiResult;
use docchat_common::time::now;
use sea_orm::sea_query::{Expr, LockBehavior, LockType, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::status::{ACTIVE, COMPLETED, EXPIRED, RUNNING, SCHEDULED};
use super::{Inner, events, run};
use crate::entities::{scheduled_tasks as tasks, task_executions as executions};

/// What a claim does to a due task.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plan {
    /// Whether the due time runs.
    pub run: bool,
    pub status: &'static str,
    pub next: Option<DateTime<Utc>>,
    pub count: i64,
}

/// The plan for `task`, due at `due`, claimed at `now`; `next_after` is its schedule.
pub(super) fn plan(
    task: &tasks::Model,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    next_after: impl Fn(DateTime<Utc>) -> Option<DateTime<Utc>>,
) -> Plan {
    let past_expiry = |t: DateTime<Utc>| task.expires_at.is_some_and(|e| t > e);
    let at_max = |count: i64| task.max_executions.is_some_and(|m| count >= m);
    let done = |status| Plan {
        run: false,
        status,
        next: None,
        count: task.execution_count,
    };
    // Past expires_at nothing runs, a missed time included.
    if past_expiry(due.max(now)) {
        return done(EXPIRED);
    }
    if at_max(task.execution_count) {
        return done(COMPLETED);
    }
    let count = task.execution_count + 1;
    let next = next_after(due.max(now));
    let (status, next) = match next {
        None => (COMPLETED, None),
        Some(_) if at_max(count) => (COMPLETED, None),
        Some(t) if past_expiry(t) => (EXPIRED, None),
        Some(t) => (ACTIVE, Some(t)),
    };
    Plan {
        run: true,
        status,
        next,
        count,
    }
}

/// The schedule's next time after `after`; a schedule that no longer parses has none (the
/// API validates schedules, so this is a stored row gone bad: logged, the task completes).
fn next_time(task: &tasks::Model, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match crate::tasks::schedule_of(task, &crate::tasks::stored_config(task)) {
        Ok(s) => s.next_after(after),
        Err(e) => {
            tracing::error!(task_id = %task.id, error = %e.message, "a stored schedule does not parse; the task completes");
            None
        }
    }
}

/// Claims the next due task; `None` when nothing is due. The claimed execution, if the due
/// time runs, with its task.
pub(super) async fn claim_one(
    inner: &Inner,
) -> ApiResult<Option<Option<(executions::Model, tasks::Model)>>> {
    let txn = docchat_common::db::begin(&inner.db).await?;
    let at = now();
    let mut q = tasks::Entity::find()
        .filter(tasks::Column::Status.eq(ACTIVE))
        .filter(tasks::Column::NextExecutionAt.lte(at))
        .order_by_asc(tasks::Column::NextExecutionAt)
        .limit(1);
    if txn.get_database_backend() == DbBackend::Postgres {
        q = q.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
    }
    let Some(task) = q.one(&txn).await? else {
        txn.commit().await?;
        return Ok(None);
    };
    let Some(due) = task.next_execution_at else {
        txn.commit().await?;
        return Ok(None);
    };
    let mut plan = plan(&task, due, at, |t| next_time(&task, t));
    let execution = new_execution(inner, &task, SCHEDULED, due, at);
    if plan.run {
        // The execution first: a due time that already has one (it ran) is not run again,
        // but the task still moves past it, so it cannot stay due and be claimed for ever.
        let inserted = executions::Entity::insert(executions::ActiveModel::from(execution.clone()))
            .on_conflict(
                OnConflict::columns([executions::Column::TaskId, executions::Column::ScheduledFor])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        if inserted == 0 {
            // Counted as skipped once the task has moved on (below).
            tracing::warn!(task_id = %task.id, %due, "the due time already has an execution; the task moves past it without running");
            plan.run = false;
            plan.count = task.execution_count;
        }
    }
    let mut update = tasks::Entity::update_many()
        .col_expr(tasks::Column::Status, Expr::value(plan.status))
        .col_expr(tasks::Column::NextExecutionAt, Expr::value(plan.next))
        .col_expr(tasks::Column::UpdatedAt, Expr::value(at))
        .filter(tasks::Column::Id.eq(task.id.clone()))
        .filter(tasks::Column::Status.eq(ACTIVE))
        .filter(tasks::Column::NextExecutionAt.eq(due));
    if plan.run {
        update = update
            .col_expr(tasks::Column::ExecutionCount, Expr::value(plan.count))
            .col_expr(tasks::Column::LastExecutionAt, Expr::value(Some(at)))
            .col_expr(tasks::Column::ExecutionStatus, Expr::value(RUNNING));
    }
    if update.exec(&txn).await?.rows_affected == 0 {
        // Another replica advanced it between our read and our write (SQLite has no lock):
        // nothing of this claim stays, the execution inserted above included.
        txn.rollback().await?;
        crate::metrics::claimed("raced", at - due);
        return Ok(Some(None));
    }
    if !plan.run {
        txn.commit().await?;
        crate::metrics::claimed("skipped", at - due);
        tracing::info!(task_id = %task.id, status = plan.status, "task moved on without running its due time");
        return Ok(Some(None));
    }
    events::announce(&txn, &execution, &task.collection_id, RUNNING).await?;
    txn.commit().await?;
    crate::metrics::claimed("claimed", at - due);
    inner.relay.notify();
    Ok(Some(Some((execution, task))))
}

/// A running execution of `task` by this replica.
pub(super) fn new_execution(
    inner: &Inner,
    task: &tasks::Model,
    trigger: &str,
    scheduled_for: DateTime<Utc>,
    at: DateTime<Utc>,
) -> executions::Model {
    executions::Model {
        id: docchat_common::ids::new_id(),
        task_id: task.id.clone(),
        user_id: task.user_id.clone(),
        username: task.username.clone(),
        task_name: task.name.clone(),
        status: RUNNING.into(),
        trigger_source: trigger.into(),
        scheduled_for,
        started_at: Some(at),
        completed_at: None,
        lease_until: Some(inner.lease_until()),
        worker: inner.worker.clone(),
        chat_session_id: String::new(),
        result_summary: String::new(),
        error_message: String::new(),
        created_at: at,
    }
}

const CLAIMS_PER_TICK: usize = 200;

/// Claims what is due every tick and runs each claim in the background, until shutdown.
pub(super) async fn run_loop(inner: Arc<Inner>) {
    let mut tick = tokio::time::interval(inner.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = inner.token.cancelled() => return,
            _ = tick.tick() => {}
        }
        // At most this many claims a tick, so a row that never claims cannot spin.
        for _ in 0..CLAIMS_PER_TICK {
            if inner.token.is_cancelled() {
                return;
            }
            match claim_one(&inner).await {
                Ok(None) => break,
                Ok(Some(None)) => {}
                Ok(Some(Some((execution, task)))) => {
                    let stop = inner.hold(&execution.id);
                    inner
                        .tracker
                        .spawn(run::scheduled(inner.clone(), execution, task, stop));
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "claiming due tasks failed; retrying next tick");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::minutes(min)
    }

    fn task() -> tasks::Model {
        tasks::Model {
            id: "t".into(),
            user_id: "u".into(),
            username: "u".into(),
            name: "n".into(),
            description: String::new(),
            schedule_type: "interval".into(),
            schedule_expression: "10 minutes".into(),
            task_type: "chat_completion".into(),
            task_config: "{}".into(),
            collection_id: String::new(),
            status: ACTIVE.into(),
            execution_status: "idle".into(),
            last_execution_at: None,
            next_execution_at: Some(t(0)),
            execution_count: 0,
            max_executions: None,
            expires_at: None,
            notification_email: String::new(),
            created_at: t(0),
            updated_at: t(0),
        }
    }

    fn every10(after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(after + Duration::minutes(10))
    }

    #[test]
    fn a_missed_time_runs_once_and_the_next_is_after_now() {
        let p = plan(&task(), t(0), t(35), every10);
        assert_eq!(
            p,
            Plan {
                run: true,
                status: ACTIVE,
                next: Some(t(45)),
                count: 1
            }
        );
    }

    #[test]
    fn once_and_max_executions_complete() {
        let p = plan(&task(), t(0), t(0), |_| None);
        assert_eq!((p.run, p.status, p.next), (true, COMPLETED, None));
        let capped = tasks::Model {
            max_executions: Some(2),
            execution_count: 1,
            ..task()
        };
        let p = plan(&capped, t(0), t(0), every10);
        assert_eq!(
            (p.run, p.status, p.next, p.count),
            (true, COMPLETED, None, 2)
        );
        // Manual triggers reached the cap already: the due time does not run.
        let full = tasks::Model {
            execution_count: 2,
            ..capped
        };
        assert!(!plan(&full, t(0), t(0), every10).run);
    }

    #[test]
    fn expiry_ends_the_task() {
        let expiring = tasks::Model {
            expires_at: Some(t(5)),
            ..task()
        };
        let p = plan(&expiring, t(0), t(0), every10);
        assert_eq!((p.run, p.status, p.next), (true, EXPIRED, None));
        let p = plan(&expiring, t(6), t(6), every10);
        assert_eq!(
            (p.run, p.status, p.next, p.count),
            (false, EXPIRED, None, 0)
        );
        // Due before the expiry, claimed after it: a missed time does not run late.
        let p = plan(&expiring, t(0), t(6), every10);
        assert_eq!(
            (p.run, p.status, p.next, p.count),
            (false, EXPIRED, None, 0)
        );
    }
}
