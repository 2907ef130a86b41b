//! A task's partial update (SPEC.md "Scheduled tasks", update rules 1–4), pause and resume.
//!
//! - max_executions -1 clears the cap; expires_at 1970-01-01T00:00:00Z clears the expiry.
//! - task_config replaces the config; task_config_patch merges top-level keys (null removes a
//!   key, a nested value replaces the old one whole); both at once is a 400; the result must
//!   keep a non-empty message.
//! - A change of schedule_type, schedule_expression or timezone recomputes next_execution_at
//!   from now at once (for an active or paused task).
//! - status takes paused or active only. Pausing keeps next_execution_at (SPEC.md: filled for
//!   paused tasks); resuming recomputes it from now, so runs missed while paused are skipped.
//! - A completed or expired task resumes only once what stopped it is lifted in the same or
//!   an earlier update: max_executions cleared or above execution_count, expires_at cleared
//!   or in the future, and for a once task a time still ahead. Lifting the limit alone does
//!   not resume it; pausing it is a 400 (it has no runs to hold).

use chrono::{DateTime, Utc};
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use sea_orm::{ActiveModelTrait, DatabaseConnection, ModelTrait};
use serde_json::Value;

use crate::entities::scheduled_tasks::{self, Column as C};
use crate::tasks::{
    Config, Fields, check_config, check_max_executions, check_runs_before_expiry, check_sizes,
    check_task, first_run, future_expiry, lock_task, name_taken, not_found, notification_email,
    schedule_of, sent_config, stored_config, timezone_of,
};

/// The expires_at that clears the expiry.
const EPOCH: DateTime<Utc> = DateTime::UNIX_EPOCH;

fn merge(config: &mut Config, patch: Config) {
    for (key, value) in patch {
        if value.is_null() {
            config.remove(&key);
        } else {
            config.insert(key, value);
        }
    }
}

/// The config after the update's task_config or task_config_patch.
fn new_config(stored: Config, f: &Fields) -> ApiResult<Config> {
    match (&f.task_config, &f.task_config_patch) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "task_config and task_config_patch are mutually exclusive",
        )),
        (Some(config), None) => sent_config("task_config", config),
        (None, Some(patch)) => {
            let mut config = stored;
            merge(&mut config, sent_config("task_config_patch", patch)?);
            // The merged config is stored: it has the same ceiling.
            check_sizes(None, Some(&config))?;
            Ok(config)
        }
        (None, None) => Ok(stored),
    }
}

/// Why a completed or expired task cannot run again, if it cannot.
fn still_stopped(task: &scheduled_tasks::Model, at: DateTime<Utc>) -> Option<&'static str> {
    if task
        .max_executions
        .is_some_and(|max| task.execution_count >= max)
    {
        return Some("it reached max_executions: raise or clear (-1) max_executions to resume it");
    }
    if task.expires_at.is_some_and(|e| e <= at) {
        return Some("it expired: move or clear expires_at to resume it");
    }
    None
}

/// The columns an update writes when their value changed; the engine's own (execution_count,
/// execution_status, last_execution_at) it never writes.
const UPDATED: [C; 12] = [
    C::Name,
    C::Description,
    C::ScheduleType,
    C::ScheduleExpression,
    C::TaskType,
    C::TaskConfig,
    C::CollectionId,
    C::MaxExecutions,
    C::ExpiresAt,
    C::NotificationEmail,
    C::Status,
    C::NextExecutionAt,
];

/// Applies `f` to the caller's task `id`. The row is read and written in one transaction that
/// holds it (a row lock on PostgreSQL, the one connection on SQLite), so a claim, trigger or
/// execution ending meanwhile is neither lost nor undone.
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    f: Fields,
) -> ApiResult<scheduled_tasks::Model> {
    let txn = docchat_common::db::begin(db).await?;
    let Some(old) = lock_task(&txn, id)
        .await?
        .filter(|t| t.user_id == caller.user_id)
    else {
        return Err(not_found(id));
    };
    let task = updated(old.clone(), caller, f, now())?;
    let mut row = scheduled_tasks::ActiveModel::from(old.clone());
    for column in UPDATED {
        let value = task.get(column);
        if value != old.get(column) {
            row.set(column, value);
        }
    }
    row.set(C::UpdatedAt, task.updated_at.into());
    let name = task.name.clone();
    let saved = row.update(&txn).await.map_err(|e| name_taken(e, &name))?;
    txn.commit().await?;
    Ok(saved)
}

/// The task after the update `f` at `at`, checked.
fn updated(
    mut task: scheduled_tasks::Model,
    caller: &Caller,
    f: Fields,
    at: DateTime<Utc>,
) -> ApiResult<scheduled_tasks::Model> {
    check_sizes(f.description.as_deref(), None)?;
    let old_config = stored_config(&task);
    let config = new_config(old_config.clone(), &f)?;
    task.collection_id = check_config(&config)?;
    let rescheduled = f
        .schedule_type
        .as_ref()
        .is_some_and(|v| *v != task.schedule_type)
        || f.schedule_expression
            .as_ref()
            .is_some_and(|v| *v != task.schedule_expression)
        || timezone_of(&config) != timezone_of(&old_config);
    let Fields {
        name,
        description,
        schedule_type,
        schedule_expression,
        task_type,
        task_config: _,
        max_executions,
        expires_at,
        notification_email: email,
        status,
        task_config_patch: _,
    } = f;
    if let Some(v) = name {
        task.name = v;
    }
    if let Some(v) = description {
        task.description = v;
    }
    if let Some(v) = schedule_type {
        task.schedule_type = v;
    }
    if let Some(v) = schedule_expression {
        task.schedule_expression = v;
    }
    if let Some(v) = task_type {
        task.task_type = v;
    }
    task.task_config = Value::Object(config.clone()).to_string();
    if let Some(max) = max_executions {
        task.max_executions = if max == -1 {
            None
        } else {
            Some(check_max_executions(max)?)
        };
    }
    if let Some(text) = expires_at {
        let clears = crate::schedule::parse_datetime(&text, chrono_tz::UTC) == Some(EPOCH);
        task.expires_at = if clears {
            None
        } else {
            Some(future_expiry(&text, at)?)
        };
    }
    if let Some(email) = email {
        task.notification_email = notification_email(caller, &email)?;
    }
    check_task(&task)?;
    let schedule = schedule_of(&task, &config)?;
    let mut recompute = rescheduled && matches!(task.status.as_str(), "active" | "paused");
    match status.as_deref() {
        None => {}
        Some("paused") => {
            if !matches!(task.status.as_str(), "active" | "paused") {
                return Err(ApiError::bad_request(format!(
                    "a {} task cannot be paused",
                    task.status
                )));
            }
            task.status = "paused".into();
        }
        Some("active") => {
            let stopped = !matches!(task.status.as_str(), "active" | "paused");
            if let Some(why) = still_stopped(&task, at).filter(|_| stopped) {
                return Err(ApiError::bad_request(format!(
                    "a {} task cannot be resumed: {why}",
                    task.status
                )));
            }
            recompute |= task.status != "active";
            task.status = "active".into();
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "status must be active or paused, not {other:?}"
            )));
        }
    }
    if recompute {
        task.next_execution_at = Some(first_run(&schedule, at)?);
    }
    check_runs_before_expiry(&task)?;
    task.updated_at = at;
    Ok(task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::config_object;

    #[test]
    fn patch_merges_top_level_keys() {
        let mut config = config_object(
            "c",
            r#"{"message":"a","timezone":"UTC","llm_args":{"x":1,"y":2}}"#,
        )
        .unwrap();
        merge(
            &mut config,
            config_object("p", r#"{"timezone":null,"llm_args":{"z":3},"llm":"m"}"#).unwrap(),
        );
        assert_eq!(
            Value::Object(config),
            serde_json::json!({"message":"a","llm_args":{"z":3},"llm":"m"})
        );
    }
}
