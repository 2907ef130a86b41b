//! /api/v1/scheduled_tasks (SPEC.md "Scheduled tasks"; shapes of the h2oGPTe client's
//! types_scheduled_task.py, AGENTS.md §6: strings never null, timestamps ISO 8601 or null,
//! task_config an object). scheduler-service keeps the tasks, validates every field and
//! decides access; here JSON becomes its messages and back.

use actix_web::{HttpResponse, delete, get, post, put, web};
use chrono::{DateTime, Utc};
use docchat_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{PageQuery, page, ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult};

/// Create and PUT bodies: on PUT only the fields sent change.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ScheduledTaskBody {
    /// Unique per user; required on create.
    pub name: Option<String>,
    pub description: Option<String>,
    /// once, recurring or interval; required on create.
    pub schedule_type: Option<String>,
    /// ISO 8601 time (once), five-field cron (recurring), `N minutes` / `N hours` (interval).
    pub schedule_expression: Option<String>,
    /// chat_completion or agent_task; required on create.
    pub task_type: Option<String>,
    /// An object with a non-empty message; may hold system_prompt, collection_id, timezone,
    /// llm, llm_args. Required on create; on PUT it replaces the stored one.
    #[schema(value_type = Option<Object>)]
    pub task_config: Option<Value>,
    /// Unlimited when absent; on PUT -1 clears the cap.
    pub max_executions: Option<i64>,
    /// ISO 8601 in the future; on PUT `1970-01-01T00:00:00Z` clears the expiry.
    pub expires_at: Option<String>,
    /// An address, "" or `current_user` (the caller's own address).
    pub notification_email: Option<String>,
    /// PUT only: paused or active.
    pub status: Option<String>,
    /// PUT only: merged into the stored config (null removes a key); not with task_config.
    #[schema(value_type = Option<Object>)]
    pub task_config_patch: Option<Value>,
}

impl From<ScheduledTaskBody> for pb::TaskFields {
    fn from(b: ScheduledTaskBody) -> Self {
        let ScheduledTaskBody {
            name,
            description,
            schedule_type,
            schedule_expression,
            task_type,
            task_config,
            max_executions,
            expires_at,
            notification_email,
            status,
            task_config_patch,
        } = b;
        pb::TaskFields {
            name,
            description,
            schedule_type,
            schedule_expression,
            task_type,
            task_config_json: task_config.map(|v| v.to_string()),
            max_executions,
            expires_at,
            notification_email,
            status,
            task_config_patch_json: task_config_patch.map(|v| v.to_string()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTask {
    pub id: String,
    pub user_id: String,
    pub username: String,
    pub name: String,
    pub description: String,
    pub schedule_type: String,
    pub schedule_expression: String,
    pub task_type: String,
    #[schema(value_type = Object)]
    pub task_config: Value,
    /// active, paused, completed or expired.
    pub status: String,
    /// idle or running.
    pub execution_status: String,
    pub last_execution_at: Option<DateTime<Utc>>,
    /// Set for active and paused tasks.
    pub next_execution_at: Option<DateTime<Utc>>,
    pub execution_count: i64,
    /// null: unlimited.
    pub max_executions: Option<i64>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub is_owner: bool,
    pub notification_email: String,
}

impl TryFrom<pb::Task> for ScheduledTask {
    type Error = HttpError;

    fn try_from(t: pb::Task) -> Result<Self, HttpError> {
        let pb::Task {
            id,
            user_id,
            username,
            name,
            description,
            schedule_type,
            schedule_expression,
            task_type,
            task_config_json,
            status,
            execution_status,
            last_execution_at,
            next_execution_at,
            execution_count,
            max_executions,
            expires_at,
            created_at,
            updated_at,
            is_owner,
            notification_email,
        } = t;
        let task_config = match serde_json::from_str(&task_config_json) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => Value::Object(serde_json::Map::new()),
        };
        Ok(ScheduledTask {
            id,
            user_id,
            username,
            name,
            description,
            schedule_type,
            schedule_expression,
            task_type,
            task_config,
            status,
            execution_status,
            last_execution_at: ts(last_execution_at),
            next_execution_at: ts(next_execution_at),
            execution_count,
            max_executions,
            expires_at: ts(expires_at),
            created_at: ts_req(created_at)?,
            updated_at: ts_req(updated_at)?,
            is_owner,
            notification_email,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskList {
    pub items: Vec<ScheduledTask>,
    pub total: i64,
}

/// One run of a task; `id` and `execution_id` are the same value.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskExecution {
    pub id: String,
    pub execution_id: String,
    pub scheduled_task_id: String,
    pub user_id: String,
    pub username: String,
    /// running, completed, failed or cancelled.
    pub status: String,
    /// scheduled or manual.
    pub trigger_source: String,
    pub task_name: String,
    pub scheduled_for: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub chat_session_id: String,
    pub result_summary: String,
    pub error_message: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<pb::Execution> for ScheduledTaskExecution {
    type Error = HttpError;

    fn try_from(e: pb::Execution) -> Result<Self, HttpError> {
        let pb::Execution {
            id,
            scheduled_task_id,
            user_id,
            username,
            status,
            trigger_source,
            task_name,
            scheduled_for,
            started_at,
            completed_at,
            chat_session_id,
            result_summary,
            error_message,
            created_at,
        } = e;
        Ok(ScheduledTaskExecution {
            execution_id: id.clone(),
            id,
            scheduled_task_id,
            user_id,
            username,
            status,
            trigger_source,
            task_name,
            scheduled_for: ts(scheduled_for),
            started_at: ts(started_at),
            completed_at: ts(completed_at),
            chat_session_id,
            result_summary,
            error_message,
            created_at: ts_req(created_at)?,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskExecutionList {
    pub items: Vec<ScheduledTaskExecution>,
    pub total: i64,
}

impl TryFrom<pb::ExecutionList> for ScheduledTaskExecutionList {
    type Error = HttpError;

    fn try_from(l: pb::ExecutionList) -> Result<Self, HttpError> {
        Ok(ScheduledTaskExecutionList {
            items: l
                .items
                .into_iter()
                .map(TryInto::try_into)
                .collect::<HttpResult<_>>()?,
            total: super::json_int(l.total),
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskTriggerResult {
    pub execution_id: String,
    pub status: String,
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskSummary {
    pub total_tasks: i64,
    pub active_tasks: i64,
    pub currently_running_tasks: i64,
    pub paused_tasks: i64,
    pub completed_tasks: i64,
    pub expired_tasks: i64,
    /// Recurring and interval tasks.
    pub recurring_tasks: i64,
    pub one_time_tasks: i64,
    pub chat_completion_tasks: i64,
    pub agent_tasks: i64,
    pub total_executions: i64,
    /// Active tasks whose next run falls before the end of today (UTC).
    pub tasks_executing_today: i64,
}

impl From<pb::TaskSummary> for ScheduledTaskSummary {
    fn from(s: pb::TaskSummary) -> Self {
        let pb::TaskSummary {
            total_tasks,
            active_tasks,
            currently_running_tasks,
            paused_tasks,
            completed_tasks,
            expired_tasks,
            recurring_tasks,
            one_time_tasks,
            chat_completion_tasks,
            agent_tasks,
            total_executions,
            tasks_executing_today,
            unique_users: _,
            failed_executions_today: _,
            running_executions: _,
        } = s;
        ScheduledTaskSummary {
            total_tasks,
            active_tasks,
            currently_running_tasks,
            paused_tasks,
            completed_tasks,
            expired_tasks,
            recurring_tasks,
            one_time_tasks,
            chat_completion_tasks,
            agent_tasks,
            total_executions,
            tasks_executing_today,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ScheduledTaskIds {
    pub task_ids: Vec<String>,
}

/// DELETE's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskDeleted {
    /// `deleted`.
    pub status: String,
}

/// batch_delete's answer: how many of the caller's tasks went.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTasksDeleted {
    /// `deleted`.
    pub status: String,
    pub count: i64,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ScheduledTaskListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// A case-insensitive substring of the name.
    pub name_filter: Option<String>,
    /// active, paused, completed or expired.
    pub status_filter: Option<String>,
    /// Tasks bound to this collection (UUID); not with has_collection.
    pub collection_id: Option<String>,
    /// true: tasks bound to a collection; false: tasks without one.
    pub has_collection: Option<bool>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ScheduledTaskExecutionsQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// running, completed, failed or cancelled.
    pub status_filter: Option<String>,
    /// A case-insensitive substring of the task's name.
    pub name_filter: Option<String>,
    /// `1 hour`, `1 day`, `7 days`, `1 month` or `100 years`; default the last 90 days.
    pub time_interval: Option<String>,
    /// scheduled or manual.
    pub trigger_filter: Option<String>,
}

/// A page of tasks as `GET /scheduled_tasks` answers it (the caller's own, or every user's).
async fn task_list(api: &Api, request: pb::ListTasksRequest) -> HttpResult<HttpResponse> {
    let offset = request.offset;
    let list = api.scheduler().list_tasks(request).await?.into_inner();
    let body = ScheduledTaskList {
        items: list
            .items
            .into_iter()
            .map(ScheduledTask::try_from)
            .collect::<HttpResult<_>>()?,
        total: super::json_int(list.total),
    };
    let rows = body.items.len();
    Ok(super::list_answer(&body, offset, rows, list.size_limited))
}

/// Deletes tasks among `ids` (the caller's own, or any user's) and says how many went.
async fn delete_tasks(
    api: &Api,
    ids: Vec<String>,
    any_owner: bool,
) -> HttpResult<web::Json<ScheduledTasksDeleted>> {
    let count = api
        .scheduler()
        .delete_tasks(pb::TaskIds { ids, any_owner })
        .await?
        .into_inner()
        .count;
    Ok(web::Json(ScheduledTasksDeleted {
        status: "deleted".into(),
        count: super::json_int(count),
    }))
}

/// Registers this module's routes; the fixed paths before `/{id}`.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_all_scheduled_task_executions)
        .service(get_scheduled_task_summary)
        .service(batch_delete_scheduled_tasks)
        .service(create_scheduled_task)
        .service(list_scheduled_tasks)
        .service(get_scheduled_task)
        .service(update_scheduled_task)
        .service(delete_scheduled_task)
        .service(trigger_scheduled_task)
        .service(list_scheduled_task_executions)
        .service(admin_list_executions)
        .service(admin_summary)
        .service(admin_execution_stats)
        .service(admin_batch_delete)
        .service(admin_list_tasks)
        .service(admin_update_task);
}

#[utoipa::path(tag = "Scheduled tasks", request_body = ScheduledTaskBody,
    responses((status = 201, body = ScheduledTask), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/scheduled_tasks")]
pub async fn create_scheduled_task(
    api: Api,
    body: web::Json<ScheduledTaskBody>,
) -> HttpResult<HttpResponse> {
    let fields = pb::TaskFields::from(body.into_inner());
    let created = api.scheduler().create_task(fields).await?.into_inner();
    Ok(HttpResponse::Created().json(ScheduledTask::try_from(created)?))
}

/// A page holds at most 8 MiB of names, descriptions and task configs (at least one task),
/// so it can hold fewer than `limit` while `total` counts more; then `x-next-offset` names
/// the offset of the next page.
#[utoipa::path(tag = "Scheduled tasks", params(ScheduledTaskListQuery),
    responses((status = 200, body = ScheduledTaskList, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/scheduled_tasks")]
pub async fn list_scheduled_tasks(
    api: Api,
    query: web::Query<ScheduledTaskListQuery>,
) -> HttpResult<HttpResponse> {
    let q = query.into_inner();
    let (offset, limit) = page(q.offset, q.limit)?;
    let request = pb::ListTasksRequest {
        offset,
        limit,
        name_filter: q.name_filter.unwrap_or_default(),
        status_filter: q.status_filter.unwrap_or_default(),
        collection_id: q.collection_id.unwrap_or_default(),
        has_collection: q.has_collection,
        all_users: false,
        user_filter: String::new(),
    };
    task_list(&api, request).await
}

#[utoipa::path(tag = "Scheduled tasks", params(ScheduledTaskExecutionsQuery),
    responses((status = 200, body = ScheduledTaskExecutionList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/scheduled_tasks/executions")]
pub async fn list_all_scheduled_task_executions(
    api: Api,
    query: web::Query<ScheduledTaskExecutionsQuery>,
) -> HttpResult<web::Json<ScheduledTaskExecutionList>> {
    let q = query.into_inner();
    let (offset, limit) = page(q.offset, q.limit)?;
    let request = pb::ListExecutionsRequest {
        offset,
        limit,
        status_filter: q.status_filter.unwrap_or_default(),
        name_filter: q.name_filter.unwrap_or_default(),
        time_interval: q.time_interval.unwrap_or_default(),
        trigger_filter: q.trigger_filter.unwrap_or_default(),
        all_users: false,
        task_id: String::new(),
    };
    let list = api.scheduler().list_executions(request).await?;
    Ok(web::Json(list.into_inner().try_into()?))
}

#[utoipa::path(tag = "Scheduled tasks",
    responses((status = 200, body = ScheduledTaskSummary), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/scheduled_tasks/summary")]
pub async fn get_scheduled_task_summary(api: Api) -> HttpResult<web::Json<ScheduledTaskSummary>> {
    let summary = api
        .scheduler()
        .summary(pb::SummaryRequest { all_users: false })
        .await?;
    Ok(web::Json(summary.into_inner().into()))
}

#[utoipa::path(tag = "Scheduled tasks", request_body = ScheduledTaskIds,
    responses((status = 200, body = ScheduledTasksDeleted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/scheduled_tasks/batch_delete")]
pub async fn batch_delete_scheduled_tasks(
    api: Api,
    body: web::Json<ScheduledTaskIds>,
) -> HttpResult<web::Json<ScheduledTasksDeleted>> {
    let ids = body.into_inner().task_ids;
    delete_tasks(&api, ids, false).await
}

#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path)),
    responses((status = 200, body = ScheduledTask), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/scheduled_tasks/{task_id}")]
pub async fn get_scheduled_task(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<ScheduledTask>> {
    let id = path.into_inner();
    let task = api.scheduler().get_task(pb::TaskRef { id }).await?;
    Ok(web::Json(task.into_inner().try_into()?))
}

#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path)), request_body = ScheduledTaskBody,
    responses((status = 200, body = ScheduledTask), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/scheduled_tasks/{task_id}")]
pub async fn update_scheduled_task(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ScheduledTaskBody>,
) -> HttpResult<web::Json<ScheduledTask>> {
    let request = pb::UpdateTaskRequest {
        id: path.into_inner(),
        fields: Some(body.into_inner().into()),
        any_owner: false,
    };
    let task = api.scheduler().update_task(request).await?;
    Ok(web::Json(task.into_inner().try_into()?))
}

#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path)),
    responses((status = 200, body = ScheduledTaskDeleted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/scheduled_tasks/{task_id}")]
pub async fn delete_scheduled_task(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<ScheduledTaskDeleted>> {
    let id = path.into_inner();
    api.scheduler().delete_task(pb::TaskRef { id }).await?;
    Ok(web::Json(ScheduledTaskDeleted {
        status: "deleted".into(),
    }))
}

/// The body (`{}`) is not read.
#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path)),
    responses((status = 200, body = ScheduledTaskTriggerResult), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/scheduled_tasks/{task_id}/trigger")]
pub async fn trigger_scheduled_task(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<ScheduledTaskTriggerResult>> {
    let id = path.into_inner();
    let pb::TriggerResult {
        execution_id,
        status,
        session_id,
    } = api
        .scheduler()
        .trigger_task(pb::TaskRef { id })
        .await?
        .into_inner();
    Ok(web::Json(ScheduledTaskTriggerResult {
        execution_id,
        status,
        session_id,
    }))
}

#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path), PageQuery),
    responses((status = 200, body = ScheduledTaskExecutionList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/scheduled_tasks/{task_id}/executions")]
pub async fn list_scheduled_task_executions(
    api: Api,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<ScheduledTaskExecutionList>> {
    let (offset, limit) = page(query.offset, query.limit)?;
    let request = pb::ListTaskExecutionsRequest {
        task_id: path.into_inner(),
        offset,
        limit,
    };
    let list = api.scheduler().list_task_executions(request).await?;
    Ok(web::Json(list.into_inner().try_into()?))
}

/// The administrators' task counters: every user's, with how many users own tasks, how many
/// executions failed since midnight (UTC) and how many run now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskAdminSummary {
    #[serde(flatten)]
    pub tasks: ScheduledTaskSummary,
    pub unique_users: i64,
    pub failed_executions_today: i64,
    pub running_executions: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DailyExecutions {
    /// YYYY-MM-DD (UTC).
    pub day: String,
    pub total: i64,
    pub completed: i64,
    pub failed: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionTotals {
    pub total_executions: i64,
    pub completed_executions: i64,
    pub failed_executions: i64,
    pub running_executions: i64,
    pub total_tasks: i64,
    pub active_tasks: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopTask {
    pub task_id: String,
    pub task_name: String,
    pub username: String,
    pub task_type: String,
    pub execution_count: i64,
    pub completed_count: i64,
    pub failed_count: i64,
}

/// Executions in a window: per UTC day, totals, and the ten tasks run most.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskExecutionStats {
    pub daily_executions: Vec<DailyExecutions>,
    pub totals: ExecutionTotals,
    pub top_tasks: Vec<TopTask>,
}

impl From<pb::ExecutionStats> for ScheduledTaskExecutionStats {
    fn from(s: pb::ExecutionStats) -> Self {
        let pb::ExecutionStats {
            daily_executions,
            total_executions,
            completed_executions,
            failed_executions,
            running_executions,
            total_tasks,
            active_tasks,
            top_tasks,
        } = s;
        ScheduledTaskExecutionStats {
            daily_executions: daily_executions
                .into_iter()
                .map(|d| DailyExecutions {
                    day: d.day,
                    total: d.total,
                    completed: d.completed,
                    failed: d.failed,
                })
                .collect(),
            totals: ExecutionTotals {
                total_executions,
                completed_executions,
                failed_executions,
                running_executions,
                total_tasks,
                active_tasks,
            },
            top_tasks: top_tasks
                .into_iter()
                .map(|t| TopTask {
                    task_id: t.task_id,
                    task_name: t.task_name,
                    username: t.username,
                    task_type: t.task_type,
                    execution_count: t.execution_count,
                    completed_count: t.completed_count,
                    failed_count: t.failed_count,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct AdminTaskListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// A case-insensitive substring of the name.
    pub name_filter: Option<String>,
    /// active, paused, completed or expired.
    pub status_filter: Option<String>,
    /// A case-insensitive substring of the owner's username.
    pub user_filter: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct AdminExecutionsQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// Only this task's executions.
    pub task_id: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ExecutionStatsQuery {
    /// `1 hour`, `1 day`, `7 days` (the default), `1 month` or `100 years`.
    pub interval: Option<String>,
}

/// An administrator's update's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledTaskUpdated {
    /// `updated`.
    pub status: String,
    pub task: ScheduledTask,
}

/// Every user's tasks (administrators), newest first; pages as `GET /scheduled_tasks`.
#[utoipa::path(tag = "Scheduled tasks", params(AdminTaskListQuery),
    responses((status = 200, body = ScheduledTaskList, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/scheduled_tasks")]
pub async fn admin_list_tasks(
    api: Api,
    query: web::Query<AdminTaskListQuery>,
) -> HttpResult<HttpResponse> {
    let q = query.into_inner();
    let (offset, limit) = page(q.offset, q.limit)?;
    let request = pb::ListTasksRequest {
        offset,
        limit,
        name_filter: q.name_filter.unwrap_or_default(),
        status_filter: q.status_filter.unwrap_or_default(),
        collection_id: String::new(),
        has_collection: None,
        all_users: true,
        user_filter: q.user_filter.unwrap_or_default(),
    };
    task_list(&api, request).await
}

/// Changes any user's task (administrators), checked as the owner's own change would be.
#[utoipa::path(tag = "Scheduled tasks", params(("task_id" = String, Path)), request_body = ScheduledTaskBody,
    responses((status = 200, body = ScheduledTaskUpdated), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/admin/scheduled_tasks/{task_id}")]
pub async fn admin_update_task(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ScheduledTaskBody>,
) -> HttpResult<web::Json<ScheduledTaskUpdated>> {
    let request = pb::UpdateTaskRequest {
        id: path.into_inner(),
        fields: Some(body.into_inner().into()),
        any_owner: true,
    };
    let task = api.scheduler().update_task(request).await?.into_inner();
    Ok(web::Json(ScheduledTaskUpdated {
        status: "updated".into(),
        task: task.try_into()?,
    }))
}

/// Deletes any users' tasks among `task_ids` (administrators), with their executions.
#[utoipa::path(tag = "Scheduled tasks", request_body = ScheduledTaskIds,
    responses((status = 200, body = ScheduledTasksDeleted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/admin/scheduled_tasks/batch_delete")]
pub async fn admin_batch_delete(
    api: Api,
    body: web::Json<ScheduledTaskIds>,
) -> HttpResult<web::Json<ScheduledTasksDeleted>> {
    let ids = body.into_inner().task_ids;
    delete_tasks(&api, ids, true).await
}

/// Every user's task counters (administrators).
#[utoipa::path(tag = "Scheduled tasks",
    responses((status = 200, body = ScheduledTaskAdminSummary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/scheduled_tasks/summary")]
pub async fn admin_summary(api: Api) -> HttpResult<web::Json<ScheduledTaskAdminSummary>> {
    let summary = api
        .scheduler()
        .summary(pb::SummaryRequest { all_users: true })
        .await?
        .into_inner();
    Ok(web::Json(ScheduledTaskAdminSummary {
        unique_users: summary.unique_users,
        failed_executions_today: summary.failed_executions_today,
        running_executions: summary.running_executions,
        tasks: summary.into(),
    }))
}

/// Every user's executions in a window (administrators).
#[utoipa::path(tag = "Scheduled tasks", params(ExecutionStatsQuery),
    responses((status = 200, body = ScheduledTaskExecutionStats), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/scheduled_tasks/execution_stats")]
pub async fn admin_execution_stats(
    api: Api,
    query: web::Query<ExecutionStatsQuery>,
) -> HttpResult<web::Json<ScheduledTaskExecutionStats>> {
    let interval = query.into_inner().interval.unwrap_or_default();
    let stats = api
        .scheduler()
        .get_execution_stats(pb::ExecutionStatsRequest { interval })
        .await?;
    Ok(web::Json(stats.into_inner().into()))
}

/// Every user's executions (administrators), newest first, of every time.
#[utoipa::path(tag = "Scheduled tasks", params(AdminExecutionsQuery),
    responses((status = 200, body = ScheduledTaskExecutionList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/scheduled_tasks/executions")]
pub async fn admin_list_executions(
    api: Api,
    query: web::Query<AdminExecutionsQuery>,
) -> HttpResult<web::Json<ScheduledTaskExecutionList>> {
    let q = query.into_inner();
    let (offset, limit) = page(q.offset, q.limit)?;
    let request = pb::ListExecutionsRequest {
        offset,
        limit,
        status_filter: String::new(),
        name_filter: String::new(),
        time_interval: "100 years".into(),
        trigger_filter: String::new(),
        all_users: true,
        task_id: q.task_id.unwrap_or_default(),
    };
    let list = api.scheduler().list_executions(request).await?;
    Ok(web::Json(list.into_inner().try_into()?))
}
