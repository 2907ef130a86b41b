//! Scheduled tasks: create, read, list, delete (SPEC.md "Scheduled tasks"). Every call acts
//! for the caller: another user's task is NOT_FOUND. Updates are in task_update.rs, the
//! executions' listings in executions.rs, the counters in summary.rs.

use chrono::{DateTime, Utc};
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::limits;
use docchat_common::time::now;
use sea_orm::sea_query::{Expr, Func, LikeExpr, LockType};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, SqlErr,
};
use serde_json::{Map, Value};

use crate::entities::{scheduled_tasks, task_executions};
use crate::schedule::{Schedule, parse_datetime, parse_timezone};

pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;
pub const TASK_TYPES: [&str; 2] = ["chat_completion", "agent_task"];
pub const STATUSES: [&str; 4] = ["active", "paused", "completed", "expired"];
/// The notification address standing for the caller's own.
pub const CURRENT_USER: &str = "current_user";
const MAX_NAME_CHARS: usize = limits::NAME_CHARS;
/// The stored column's size.
const MAX_EXPRESSION_CHARS: usize = 255;
/// The most ids one batch delete takes (a query's bound parameters are limited).
pub const MAX_BATCH_IDS: usize = 1000;

/// A JSON object, as task_config is kept.
pub type Config = Map<String, Value>;

/// The fields of a create or an update as the caller sent them; `None` = not sent.
#[derive(Debug, Default)]
pub struct Fields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub schedule_type: Option<String>,
    pub schedule_expression: Option<String>,
    pub task_type: Option<String>,
    /// JSON object text.
    pub task_config: Option<String>,
    pub max_executions: Option<i64>,
    pub expires_at: Option<String>,
    pub notification_email: Option<String>,
    /// Update only.
    pub status: Option<String>,
    /// Update only: JSON object text.
    pub task_config_patch: Option<String>,
}

pub fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("scheduled task {id} not found"))
}

pub fn check_one_of(field: &str, value: &str, allowed: &[&str]) -> ApiResult<()> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{field} must be one of {}, not {value:?}",
            allowed.join(", ")
        )))
    }
}

/// `text` as a JSON object; anything else is a 400 naming `field`.
pub fn config_object(field: &str, text: &str) -> ApiResult<Config> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::bad_request(format!(
            "{field} must be a JSON object"
        ))),
    }
}

/// A task_config (or patch) as sent: at most `limits::JSON_BYTES` of JSON text (413), then
/// a JSON object (400).
pub fn sent_config(field: &str, text: &str) -> ApiResult<Config> {
    limits::check_json(field, text)?;
    config_object(field, text)
}

/// The ceilings on the free text and the config of a task as sent (the name's is in
/// [`check_task`]); a task stored before them can still change its other fields.
pub fn check_sizes(description: Option<&str>, config: Option<&Config>) -> ApiResult<()> {
    if let Some(d) = description {
        limits::check_text("description", d)?;
    }
    if let Some(c) = config {
        limits::check_json("task_config", &Value::Object(c.clone()).to_string())?;
    }
    Ok(())
}

/// The stored config text of a task.
pub fn stored_config(task: &scheduled_tasks::Model) -> Config {
    config_object("task_config", &task.task_config).unwrap_or_default()
}

/// task_config.timezone, if any.
pub fn timezone_of(config: &Config) -> Option<&str> {
    config.get("timezone").and_then(Value::as_str)
}

/// Checks a task_config and answers its collection id ("" for none).
pub fn check_config(config: &Config) -> ApiResult<String> {
    match config.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => {}
        _ => {
            return Err(ApiError::bad_request(
                "task_config must hold a non-empty string message",
            ));
        }
    }
    for key in ["system_prompt", "llm", "timezone", "collection_id"] {
        if !matches!(config.get(key), None | Some(Value::Null | Value::String(_))) {
            return Err(ApiError::bad_request(format!(
                "task_config.{key} must be a string"
            )));
        }
    }
    if !matches!(
        config.get("llm_args"),
        None | Some(Value::Null | Value::Object(_))
    ) {
        return Err(ApiError::bad_request(
            "task_config.llm_args must be an object",
        ));
    }
    parse_timezone(timezone_of(config))?;
    match config.get("collection_id").and_then(Value::as_str) {
        None | Some("") => Ok(String::new()),
        Some(id) => uuid::Uuid::parse_str(id)
            .map(|u| u.to_string())
            .map_err(|_| {
                ApiError::bad_request(format!("task_config.collection_id {id:?} is not a UUID"))
            }),
    }
}

/// The task's schedule, read with its config's timezone.
pub fn schedule_of(task: &scheduled_tasks::Model, config: &Config) -> ApiResult<Schedule> {
    Schedule::parse(
        &task.schedule_type,
        &task.schedule_expression,
        timezone_of(config),
    )
}

/// The first run after `at`; a once time that has passed is a 400 (it would never run).
pub fn first_run(schedule: &Schedule, at: DateTime<Utc>) -> ApiResult<DateTime<Utc>> {
    schedule.next_after(at).ok_or_else(|| {
        ApiError::bad_request("schedule_expression is in the past: a once task would never run")
    })
}

/// An expires_at the caller sent: ISO 8601 in the future.
pub fn future_expiry(text: &str, at: DateTime<Utc>) -> ApiResult<DateTime<Utc>> {
    let expiry = parse_datetime(text, chrono_tz::UTC).ok_or_else(|| {
        ApiError::bad_request(format!("expires_at {text:?} is not an ISO 8601 time"))
    })?;
    if expiry <= at {
        return Err(ApiError::bad_request("expires_at must be in the future"));
    }
    Ok(expiry)
}

pub fn check_max_executions(max: i64) -> ApiResult<i64> {
    if max < 1 {
        return Err(ApiError::bad_request("max_executions must be 1 or more"));
    }
    Ok(max)
}

/// `current_user` becomes the caller's address; otherwise "" or a plausible address.
pub fn notification_email(caller: &Caller, email: &str) -> ApiResult<String> {
    let email = email.trim();
    if email == CURRENT_USER {
        if caller.email.is_empty() {
            return Err(ApiError::bad_request(
                "notification_email current_user: your account has no email address",
            ));
        }
        return Ok(caller.email.clone());
    }
    if email.is_empty() || plausible_email(email) {
        Ok(email.to_owned())
    } else {
        Err(ApiError::bad_request(format!(
            "notification_email {email:?} is not an email address (or `current_user`)"
        )))
    }
}

fn plausible_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    email.len() <= 320
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Checks the fields every task has: name, task_type.
/// An active task whose next run falls after its expires_at would never run again while
/// still showing active with a next run: refused, so the task stays as it was.
pub fn check_runs_before_expiry(task: &scheduled_tasks::Model) -> ApiResult<()> {
    match (
        task.status.as_str(),
        task.next_execution_at,
        task.expires_at,
    ) {
        ("active" | "paused", Some(next), Some(expiry)) if next > expiry => {
            Err(ApiError::bad_request(format!(
                "expires_at {} is before the task's next run at {}: it would never run",
                expiry.to_rfc3339(),
                next.to_rfc3339()
            )))
        }
        _ => Ok(()),
    }
}

pub fn check_task(task: &scheduled_tasks::Model) -> ApiResult<()> {
    if task.name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    if task.name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "name is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    if task.schedule_expression.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(ApiError::bad_request(format!(
            "schedule_expression is longer than {MAX_EXPRESSION_CHARS} characters"
        )));
    }
    check_one_of("task_type", &task.task_type, &TASK_TYPES)
}

/// A unique-index violation on (user, name) is the caller's duplicate name.
pub fn name_taken(err: sea_orm::DbErr, name: &str) -> ApiError {
    if matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) {
        ApiError::conflict(format!("a scheduled task named {name:?} already exists"))
    } else {
        err.into()
    }
}

fn required(value: Option<String>, field: &str) -> ApiResult<String> {
    value.ok_or_else(|| ApiError::bad_request(format!("{field} is required")))
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    f: Fields,
) -> ApiResult<scheduled_tasks::Model> {
    if f.status.is_some() || f.task_config_patch.is_some() {
        return Err(ApiError::bad_request(
            "status and task_config_patch are for updates only",
        ));
    }
    let at = now();
    let config = sent_config("task_config", &required(f.task_config, "task_config")?)?;
    check_sizes(f.description.as_deref(), None)?;
    let collection_id = check_config(&config)?;
    let mut task = scheduled_tasks::Model {
        id: docchat_common::ids::new_id(),
        user_id: caller.user_id.clone(),
        username: caller.username.clone(),
        name: required(f.name, "name")?,
        description: f.description.unwrap_or_default(),
        schedule_type: required(f.schedule_type, "schedule_type")?,
        schedule_expression: required(f.schedule_expression, "schedule_expression")?,
        task_type: required(f.task_type, "task_type")?,
        task_config: Value::Object(config.clone()).to_string(),
        collection_id,
        status: "active".into(),
        execution_status: "idle".into(),
        last_execution_at: None,
        next_execution_at: None,
        execution_count: 0,
        max_executions: f.max_executions.map(check_max_executions).transpose()?,
        expires_at: f
            .expires_at
            .as_deref()
            .map(|e| future_expiry(e, at))
            .transpose()?,
        notification_email: notification_email(
            caller,
            f.notification_email.as_deref().unwrap_or(""),
        )?,
        created_at: at,
        updated_at: at,
    };
    check_task(&task)?;
    task.next_execution_at = Some(first_run(&schedule_of(&task, &config)?, at)?);
    check_runs_before_expiry(&task)?;
    let name = task.name.clone();
    scheduled_tasks::Entity::insert(scheduled_tasks::ActiveModel::from(task))
        .exec_with_returning(db)
        .await
        .map_err(|e| name_taken(e, &name))
}

/// Locks the task row until `conn`'s transaction ends (PostgreSQL; SQLite's one connection
/// is the lock there).
pub async fn lock_task<C: ConnectionTrait>(
    conn: &C,
    task_id: &str,
) -> Result<Option<scheduled_tasks::Model>, DbErr> {
    let mut q = scheduled_tasks::Entity::find_by_id(task_id.to_owned());
    if conn.get_database_backend() == DbBackend::Postgres {
        q = q.lock(LockType::Update);
    }
    q.one(conn).await
}

/// The caller's task `id`; NOT_FOUND for another user's or a missing one.
pub async fn find_own(
    db: &impl ConnectionTrait,
    caller: &Caller,
    id: &str,
) -> ApiResult<scheduled_tasks::Model> {
    scheduled_tasks::Entity::find_by_id(id.to_owned())
        .filter(scheduled_tasks::Column::UserId.eq(caller.user_id.as_str()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Any user's task (administrators' calls; the caller's rights are checked before).
pub async fn find_any(db: &impl ConnectionTrait, id: &str) -> ApiResult<scheduled_tasks::Model> {
    scheduled_tasks::Entity::find_by_id(id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))
}

/// `filter` as a case-insensitive substring condition on `column` (LIKE's own wildcards in
/// the filter match themselves).
pub fn contains_ci<C: sea_orm::sea_query::IntoColumnRef>(
    column: C,
    filter: &str,
) -> sea_orm::sea_query::SimpleExpr {
    let pattern = filter
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    Expr::expr(Func::lower(Expr::col(column)))
        .like(LikeExpr::new(format!("%{pattern}%")).escape('\\'))
}

/// A page's limit: 0 = the default, capped.
pub fn limit_of(limit: u64) -> u64 {
    if limit == 0 {
        DEFAULT_LIMIT
    } else {
        limit.min(MAX_LIMIT)
    }
}

/// Whose tasks and executions a call reaches: the caller's own, or (administrators only)
/// every user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Own,
    Everyone,
}

impl Reach {
    /// [`Reach::Everyone`] when asked for, for administrators only (403 otherwise).
    pub fn of(caller: &Caller, everyone: bool) -> ApiResult<Reach> {
        if everyone {
            caller.require_admin()?;
            Ok(Reach::Everyone)
        } else {
            Ok(Reach::Own)
        }
    }
}

pub struct ListQuery {
    pub offset: u64,
    pub limit: u64,
    pub name_filter: String,
    pub status_filter: String,
    pub collection_id: String,
    pub has_collection: Option<bool>,
    pub reach: Reach,
    /// With [`Reach::Everyone`]: usernames containing this (case-insensitive).
    pub user_filter: String,
}

/// The caller's tasks, newest first, and how many match. A page holds at most `page_bytes`
/// of names, descriptions and configs (at least one task), whatever its limit; the page
/// says whether it stopped there.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    q: ListQuery,
    page_bytes: u64,
) -> ApiResult<(limits::SizedPage<scheduled_tasks::Model>, u64)> {
    use scheduled_tasks::Column as C;
    let mut query = scheduled_tasks::Entity::find();
    match q.reach {
        Reach::Own => query = query.filter(C::UserId.eq(caller.user_id.as_str())),
        Reach::Everyone if !q.user_filter.is_empty() => {
            query = query.filter(contains_ci(C::Username, &q.user_filter));
        }
        Reach::Everyone => {}
    }
    if !q.status_filter.is_empty() {
        check_one_of("status_filter", &q.status_filter, &STATUSES)?;
        query = query.filter(C::Status.eq(q.status_filter.as_str()));
    }
    if !q.collection_id.is_empty() && q.has_collection.is_some() {
        return Err(ApiError::bad_request(
            "collection_id and has_collection are mutually exclusive",
        ));
    }
    if !q.collection_id.is_empty() {
        let id = uuid::Uuid::parse_str(&q.collection_id).map_err(|_| {
            ApiError::bad_request(format!("collection_id {:?} is not a UUID", q.collection_id))
        })?;
        query = query.filter(C::CollectionId.eq(id.to_string()));
    }
    match q.has_collection {
        Some(true) => query = query.filter(C::CollectionId.ne("")),
        Some(false) => query = query.filter(C::CollectionId.eq("")),
        None => {}
    }
    if !q.name_filter.is_empty() {
        query = query.filter(contains_ci(C::Name, &q.name_filter));
    }
    let total = query.clone().count(db).await?;
    let page = query
        .order_by_desc(C::CreatedAt)
        .order_by_desc(C::Id)
        .offset(q.offset)
        .limit(limit_of(q.limit));
    let sized = [C::Name, C::Description, C::TaskConfig];
    let page = limits::page_by_size(db, page, C::Id, &sized, page_bytes).await?;
    Ok((page, total))
}

/// The tasks among `ids` within `reach` of the caller (at most [`MAX_BATCH_IDS`]).
pub async fn ids_within(
    db: &impl ConnectionTrait,
    caller: &Caller,
    reach: Reach,
    ids: Vec<String>,
) -> ApiResult<Vec<String>> {
    if ids.len() > MAX_BATCH_IDS {
        return Err(ApiError::bad_request(format!(
            "task_ids holds more than {MAX_BATCH_IDS} ids"
        )));
    }
    if ids.is_empty() {
        return Ok(ids);
    }
    let mut query = scheduled_tasks::Entity::find()
        .select_only()
        .column(scheduled_tasks::Column::Id)
        .filter(scheduled_tasks::Column::Id.is_in(ids));
    if reach == Reach::Own {
        query = query.filter(scheduled_tasks::Column::UserId.eq(caller.user_id.as_str()));
    }
    Ok(query.into_tuple().all(db).await?)
}

/// Deletes the tasks `ids` with their executions (in the caller's transaction: the engine
/// cancels their running executions in the same one); how many tasks went.
pub async fn delete_ids(conn: &impl ConnectionTrait, ids: Vec<String>) -> ApiResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    task_executions::Entity::delete_many()
        .filter(task_executions::Column::TaskId.is_in(ids.clone()))
        .exec(conn)
        .await?;
    let gone = scheduled_tasks::Entity::delete_many()
        .filter(scheduled_tasks::Column::Id.is_in(ids))
        .exec(conn)
        .await?;
    Ok(gone.rows_affected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(email: &str) -> Caller {
        Caller {
            email: email.into(),
            ..Caller::service("test")
        }
    }

    #[test]
    fn notification_emails() {
        let me = caller("me@example.com");
        assert_eq!(
            notification_email(&me, "current_user").unwrap(),
            "me@example.com"
        );
        assert_eq!(notification_email(&me, "").unwrap(), "");
        assert_eq!(notification_email(&me, "a.b@c.org").unwrap(), "a.b@c.org");
        for bad in [
            "nobody",
            "a@b",
            "@b.org",
            "a@@b.org",
            "a b@c.org",
            "a@.org",
            "a@b.org.",
        ] {
            assert!(notification_email(&me, bad).is_err(), "{bad}");
        }
        assert!(notification_email(&caller(""), "current_user").is_err());
    }

    #[test]
    fn configs() {
        let ok = |t: &str| check_config(&config_object("task_config", t).unwrap());
        assert_eq!(ok(r#"{"message":"hi"}"#).unwrap(), "");
        let id = "0b4cbd4c-6a5d-4c57-9d5e-1f4e3c8a9b10";
        assert_eq!(
            ok(&format!(r#"{{"message":"hi","collection_id":"{id}"}}"#)).unwrap(),
            id
        );
        assert_eq!(ok(r#"{"message":"hi","collection_id":null}"#).unwrap(), "");
        for bad in [
            r#"{}"#,
            r#"{"message":""}"#,
            r#"{"message":"  "}"#,
            r#"{"message":5}"#,
            r#"{"message":"hi","collection_id":"nope"}"#,
            r#"{"message":"hi","timezone":"Nowhere/Else"}"#,
            r#"{"message":"hi","timezone":3}"#,
            r#"{"message":"hi","llm_args":"x"}"#,
        ] {
            assert!(ok(bad).is_err(), "{bad}");
        }
        assert!(config_object("task_config", "[1]").is_err());
        assert!(config_object("task_config", "{").is_err());
    }
}
