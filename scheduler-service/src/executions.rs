//! Listing executions: one task's full history, and the caller's across its tasks with the
//! filters of SPEC.md (status, task name, time window, trigger). Newest first.

use chrono::{DateTime, Duration, Utc};
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Select,
};

use crate::entities::task_executions;
use crate::tasks::{Reach, check_one_of, contains_ci, find_own, limit_of};

pub const STATUSES: [&str; 4] = ["running", "completed", "failed", "cancelled"];
pub const TRIGGERS: [&str; 2] = ["scheduled", "manual"];
/// The time windows a listing takes and their lengths; a month is 30 days, a year 365.25.
pub const TIME_INTERVALS: [(&str, i64); 5] = [
    ("1 hour", 60),
    ("1 day", 24 * 60),
    ("7 days", 7 * 24 * 60),
    ("1 month", 30 * 24 * 60),
    ("100 years", 36_525 * 24 * 60),
];
/// The window when none is named.
pub const DEFAULT_WINDOW_DAYS: i64 = 90;

async fn page(
    db: &DatabaseConnection,
    query: Select<task_executions::Entity>,
    offset: u64,
    limit: u64,
) -> ApiResult<(Vec<task_executions::Model>, u64)> {
    let total = query.clone().count(db).await?;
    let items = query
        .order_by_desc(task_executions::Column::CreatedAt)
        .order_by_desc(task_executions::Column::Id)
        .offset(offset)
        .limit(limit_of(limit))
        .all(db)
        .await?;
    Ok((items, total))
}

/// Every execution of the caller's task `task_id`.
pub async fn of_task(
    db: &DatabaseConnection,
    caller: &Caller,
    task_id: &str,
    offset: u64,
    limit: u64,
) -> ApiResult<(Vec<task_executions::Model>, u64)> {
    let task = find_own(db, caller, task_id).await?;
    let query = task_executions::Entity::find()
        .filter(task_executions::Column::TaskId.eq(task.id))
        .filter(task_executions::Column::UserId.eq(caller.user_id.as_str()));
    page(db, query, offset, limit).await
}

pub struct ListQuery {
    pub offset: u64,
    pub limit: u64,
    pub status_filter: String,
    pub name_filter: String,
    pub time_interval: String,
    pub trigger_filter: String,
    pub reach: Reach,
    /// Only this task's executions; empty: every task's.
    pub task_id: String,
}

/// The start of the window `interval` names ("" = the default 90 days).
pub fn window_start(interval: &str, at: DateTime<Utc>) -> ApiResult<DateTime<Utc>> {
    if interval.is_empty() {
        return Ok(at - Duration::days(DEFAULT_WINDOW_DAYS));
    }
    TIME_INTERVALS
        .iter()
        .find(|(name, _)| *name == interval)
        .map(|(_, minutes)| at - Duration::minutes(*minutes))
        .ok_or_else(|| {
            let names: Vec<_> = TIME_INTERVALS.iter().map(|(n, _)| *n).collect();
            ApiError::bad_request(format!(
                "time_interval must be one of {}, not {interval:?}",
                names.join(", ")
            ))
        })
}

/// The caller's executions across its tasks, created within the window.
pub async fn of_caller(
    db: &DatabaseConnection,
    caller: &Caller,
    q: ListQuery,
) -> ApiResult<(Vec<task_executions::Model>, u64)> {
    use task_executions::Column as C;
    let since = window_start(&q.time_interval, now())?;
    let mut query = task_executions::Entity::find().filter(C::CreatedAt.gte(since));
    if q.reach == Reach::Own {
        query = query.filter(C::UserId.eq(caller.user_id.as_str()));
    }
    if !q.task_id.is_empty() {
        query = query.filter(C::TaskId.eq(q.task_id.as_str()));
    }
    if !q.status_filter.is_empty() {
        check_one_of("status_filter", &q.status_filter, &STATUSES)?;
        query = query.filter(C::Status.eq(q.status_filter.as_str()));
    }
    if !q.trigger_filter.is_empty() {
        check_one_of("trigger_filter", &q.trigger_filter, &TRIGGERS)?;
        query = query.filter(C::TriggerSource.eq(q.trigger_filter.as_str()));
    }
    if !q.name_filter.is_empty() {
        query = query.filter(contains_ci(C::TaskName, &q.name_filter));
    }
    page(db, query, q.offset, q.limit).await
}
