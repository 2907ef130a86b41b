//! Task counters (GET /scheduled_tasks/summary: the caller's; GET
//! /admin/scheduled_tasks/summary: every user's, with users and today's failures) and the
//! administrators' execution statistics (GET /admin/scheduled_tasks/execution_stats).
//!
//! - recurring_tasks counts recurring and interval tasks (both repeat); one_time_tasks the
//!   once tasks.
//! - currently_running_tasks: tasks whose execution_status is running.
//! - tasks_executing_today: active tasks whose next run falls before the end of today in UTC
//!   (an overdue next run counts; a paused task does not, it will not run).
//! - total_executions: every execution of the caller's tasks, with no time bound.
//! - Every user's: unique_users counts the tasks' owners, failed_executions_today the
//!   executions that failed since midnight UTC, running_executions those running now.
//! - Execution statistics: the executions created in the window, by UTC day, their totals
//!   by status, and the ten tasks run most in it.

use chrono::{DateTime, Duration, Utc};
use docchat_common::Caller;
use docchat_common::error::ApiResult;
use docchat_common::time::now;
use std::collections::{BTreeMap, HashMap};

use docchat_proto::scheduler::v1::{DailyExecutions, ExecutionStats, TaskSummary, TopTask};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect,
};

use crate::entities::{scheduled_tasks, task_executions};
use crate::executions::window_start;
use crate::tasks::Reach;

/// The end of `at`'s day in UTC (the next midnight).
fn end_of_day(at: DateTime<Utc>) -> DateTime<Utc> {
    let midnight = at.date_naive().and_time(chrono::NaiveTime::MIN).and_utc();
    midnight + Duration::days(1)
}

type Row = (String, String, String, String, Option<DateTime<Utc>>);

pub async fn summary(
    db: &DatabaseConnection,
    caller: &Caller,
    reach: Reach,
) -> ApiResult<TaskSummary> {
    use scheduled_tasks::Column as C;
    use task_executions::Column as X;
    let mut tasks = scheduled_tasks::Entity::find()
        .select_only()
        .columns([C::Status, C::ExecutionStatus, C::ScheduleType, C::TaskType])
        .column(C::NextExecutionAt);
    let mut executions = task_executions::Entity::find();
    if reach == Reach::Own {
        tasks = tasks.filter(C::UserId.eq(caller.user_id.as_str()));
        executions = executions.filter(X::UserId.eq(caller.user_id.as_str()));
    }
    let rows: Vec<Row> = tasks.into_tuple().all(db).await?;
    let total_executions = executions.count(db).await?;
    let at = now();
    let day_end = end_of_day(at);
    let mut s = TaskSummary {
        total_tasks: rows.len() as i64,
        total_executions: i64::try_from(total_executions).unwrap_or(i64::MAX),
        ..TaskSummary::default()
    };
    for (status, execution_status, schedule_type, task_type, next) in rows {
        match status.as_str() {
            "active" => s.active_tasks += 1,
            "paused" => s.paused_tasks += 1,
            "completed" => s.completed_tasks += 1,
            "expired" => s.expired_tasks += 1,
            _ => {}
        }
        if execution_status == "running" {
            s.currently_running_tasks += 1;
        }
        if schedule_type == "once" {
            s.one_time_tasks += 1;
        } else {
            s.recurring_tasks += 1;
        }
        match task_type.as_str() {
            "chat_completion" => s.chat_completion_tasks += 1,
            "agent_task" => s.agent_tasks += 1,
            _ => {}
        }
        if status == "active" && next.is_some_and(|n| n < day_end) {
            s.tasks_executing_today += 1;
        }
    }
    if reach == Reach::Everyone {
        let owners: Vec<String> = scheduled_tasks::Entity::find()
            .select_only()
            .column(C::UserId)
            .distinct()
            .into_tuple()
            .all(db)
            .await?;
        s.unique_users = owners.len() as i64;
        let failed_today = task_executions::Entity::find()
            .filter(X::Status.eq("failed"))
            .filter(X::CreatedAt.gte(day_end - Duration::days(1)))
            .count(db)
            .await?;
        s.failed_executions_today = i64::try_from(failed_today).unwrap_or(i64::MAX);
        let running = task_executions::Entity::find()
            .filter(X::Status.eq("running"))
            .count(db)
            .await?;
        s.running_executions = i64::try_from(running).unwrap_or(i64::MAX);
    }
    Ok(s)
}

/// The most-run tasks an execution statistics answer names.
const TOP_TASKS: usize = 10;

type ExecutionRow = (String, String, String, String, DateTime<Utc>);

/// Every user's executions created within `interval` (empty: 7 days): per UTC day (oldest
/// first), totals by status, the [`TOP_TASKS`] tasks run most; and how many tasks there
/// are, how many active.
pub async fn execution_stats(db: &DatabaseConnection, interval: &str) -> ApiResult<ExecutionStats> {
    use task_executions::Column as X;
    let at = now();
    let since = window_start(
        if interval.is_empty() {
            "7 days"
        } else {
            interval
        },
        at,
    )?;
    let rows: Vec<ExecutionRow> = task_executions::Entity::find()
        .select_only()
        .columns([X::TaskId, X::TaskName, X::Username, X::Status])
        .column(X::CreatedAt)
        .filter(X::CreatedAt.gte(since))
        .into_tuple()
        .all(db)
        .await?;
    let task_types: HashMap<String, String> = scheduled_tasks::Entity::find()
        .select_only()
        .columns([
            scheduled_tasks::Column::Id,
            scheduled_tasks::Column::TaskType,
        ])
        .into_tuple::<(String, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let task_statuses: Vec<String> = scheduled_tasks::Entity::find()
        .select_only()
        .column(scheduled_tasks::Column::Status)
        .into_tuple()
        .all(db)
        .await?;
    let mut stats = ExecutionStats {
        total_tasks: task_statuses.len() as i64,
        active_tasks: task_statuses.iter().filter(|s| *s == "active").count() as i64,
        ..ExecutionStats::default()
    };
    let mut days: BTreeMap<String, DailyExecutions> = BTreeMap::new();
    let mut tops: HashMap<String, TopTask> = HashMap::new();
    for (task_id, task_name, username, status, created_at) in rows {
        let day = created_at.date_naive().to_string();
        let daily = days.entry(day.clone()).or_insert_with(|| DailyExecutions {
            day,
            ..DailyExecutions::default()
        });
        let top = tops.entry(task_id.clone()).or_insert_with(|| TopTask {
            task_type: task_types.get(&task_id).cloned().unwrap_or_default(),
            task_id: task_id.clone(),
            task_name,
            username,
            ..TopTask::default()
        });
        daily.total += 1;
        stats.total_executions += 1;
        top.execution_count += 1;
        match status.as_str() {
            "completed" => {
                daily.completed += 1;
                stats.completed_executions += 1;
                top.completed_count += 1;
            }
            "failed" => {
                daily.failed += 1;
                stats.failed_executions += 1;
                top.failed_count += 1;
            }
            "running" => stats.running_executions += 1,
            _ => {}
        }
    }
    stats.daily_executions = days.into_values().collect();
    let mut tops: Vec<TopTask> = tops.into_values().collect();
    tops.sort_by(|a, b| {
        b.execution_count
            .cmp(&a.execution_count)
            .then_with(|| a.task_name.cmp(&b.task_name))
    });
    tops.truncate(TOP_TASKS);
    stats.top_tasks = tops;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_of_day_is_the_next_utc_midnight() {
        let at = DateTime::parse_from_rfc3339("2026-03-08T23:59:59Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(end_of_day(at).to_rfc3339(), "2026-03-09T00:00:00+00:00");
    }
}
