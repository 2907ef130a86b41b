//! The caller's task counters (GET /scheduled_tasks/summary).
//!
//! - recurring_tasks counts recurring and interval tasks (both repeat); one_time_tasks the
//!   once tasks.
//! - currently_running_tasks: tasks whose execution_status is running.
//! - tasks_executing_today: active tasks whose next run falls before the end of today in UTC
//!   (an overdue next run counts; a paused task does not, it will not run).
//! - total_executions: every execution of the caller's tasks, with no time bound.

use chrono::{DateTime, Duration, Utc};
use docchat_common::Caller;
use docchat_common::error::ApiResult;
use docchat_common::time::now;
use docchat_proto::scheduler::v1::TaskSummary;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect,
};

use crate::entities::{scheduled_tasks, task_executions};

/// The end of `at`'s day in UTC (the next midnight).
fn end_of_day(at: DateTime<Utc>) -> DateTime<Utc> {
    let midnight = at.date_naive().and_time(chrono::NaiveTime::MIN).and_utc();
    midnight + Duration::days(1)
}

type Row = (String, String, String, String, Option<DateTime<Utc>>);

pub async fn summary(db: &DatabaseConnection, caller: &Caller) -> ApiResult<TaskSummary> {
    use scheduled_tasks::Column as C;
    let rows: Vec<Row> = scheduled_tasks::Entity::find()
        .select_only()
        .columns([C::Status, C::ExecutionStatus, C::ScheduleType, C::TaskType])
        .column(C::NextExecutionAt)
        .filter(C::UserId.eq(caller.user_id.as_str()))
        .into_tuple()
        .all(db)
        .await?;
    let total_executions = task_executions::Entity::find()
        .filter(task_executions::Column::UserId.eq(caller.user_id.as_str()))
        .count(db)
        .await?;
    let day_end = end_of_day(now());
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
    Ok(s)
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
