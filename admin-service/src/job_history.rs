//! The job history: one row per job, fed by the `job.*` events the services publish
//! (ingest-service today). Events may arrive late or twice, so a row only moves forward:
//! queued < running < a terminal status; an event of the same rank replaces the row only
//! when it is at least as new. Rows older than [`RETENTION`] are deleted as events arrive.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use docchat_common::bus::{EventHandler, topic_matches, topics};
use docchat_common::error::{ApiError, ApiResult, error_line};
use docchat_common::jobs::display_name;
use docchat_common::time::{from_proto, now};
use docchat_proto::events::v1::{Envelope, JobChanged};
use prost::Message;
use sea_orm::ActiveValue::NotSet;
use sea_orm::sea_query::{Condition, Expr, OnConflict};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::entities::job_history::{self, Column as C};

pub const JOB_HISTORY_GROUP: &str = "admin.job-history";

/// SPEC.md's statuses; anything else a service reports is shown as `unknown`.
pub const STATUSES: [&str; 8] = [
    "queued",
    "running",
    "completed",
    "failed",
    "canceled",
    "timeout",
    "stale",
    "unknown",
];

/// How long a row is kept (SPEC.md: at most 365 days).
pub const RETENTION: Duration = Duration::days(365);
/// The window of a list or stats query without `created_after`.
pub const DEFAULT_WINDOW: Duration = Duration::days(7);
pub const DEFAULT_LIMIT: u64 = 50;
pub const MAX_LIMIT: u64 = 200;

/// queued 0 < running 1 < every terminal status 2.
pub fn rank(status: &str) -> i32 {
    match status {
        "queued" => 0,
        "running" => 1,
        _ => 2,
    }
}

/// A reported status as one of [`STATUSES`].
pub fn normalize(status: &str) -> &'static str {
    match status {
        "cancelled" => "canceled",
        s => STATUSES
            .iter()
            .find(|k| **k == s)
            .copied()
            .unwrap_or("unknown"),
    }
}

/// Microseconds, as both databases store them: keeps cursors exact.
fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.timestamp_micros(t.timestamp_micros())
        .single()
        .unwrap_or(t)
}

/// Deletes the rows created more than [`RETENTION`] ago.
pub async fn prune(db: &DatabaseConnection) -> ApiResult<u64> {
    let cutoff = now() - RETENTION;
    let gone = job_history::Entity::delete_many()
        .filter(C::CreatedAt.lt(cutoff))
        .exec(db)
        .await?;
    Ok(gone.rows_affected)
}

/// Records one event at `at` (the event's time). Returns whether the row changed.
pub async fn record(
    db: &DatabaseConnection,
    at: DateTime<Utc>,
    job: &JobChanged,
) -> ApiResult<bool> {
    let cutoff = now() - RETENTION;
    let created_at = micros(job.created_at.as_ref().map(from_proto).unwrap_or(at));
    if created_at < cutoff {
        return Ok(false);
    }
    let status = normalize(&job.status);
    let errors: Vec<String> = job.errors.iter().map(|e| error_line(e)).collect();
    let row = job_history::ActiveModel {
        id: Set(job.job_id.chars().take(64).collect()),
        name: Set(if job.name.trim().is_empty() {
            display_name(&job.kind)
        } else {
            job.name.chars().take(255).collect()
        }),
        kind: Set(job.kind.chars().take(64).collect()),
        username: Set(job.username.chars().take(255).collect()),
        user_id: Set(job.user_id.chars().take(64).collect()),
        status: Set(status.to_owned()),
        status_rank: Set(rank(status)),
        progress: Set(if job.progress.is_finite() {
            job.progress.clamp(0.0, 1.0)
        } else {
            0.0
        }),
        errors: Set(serde_json::to_string(&errors).unwrap_or_else(|_| "[]".into())),
        collection_id: Set(job.collection_id.chars().take(64).collect()),
        collection_name: Set(job.collection_name.chars().take(255).collect()),
        canceled_by: Set(job
            .canceled_by
            .as_ref()
            .map(|u| u.chars().take(255).collect())),
        cancel_reason: Set(job.cancel_reason.as_deref().map(error_line)),
        created_at: Set(created_at),
        updated_at: Set(micros(at)),
        started_at: Set(job.started_at.as_ref().map(|t| micros(from_proto(t)))),
        finished_at: Set(job.finished_at.as_ref().map(|t| micros(from_proto(t)))),
        deleted_at: Set(None),
    };
    let inserted = job_history::Entity::insert(row.clone())
        .on_conflict(OnConflict::column(C::Id).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    if inserted > 0 {
        return Ok(true);
    }
    // One conditional update, so two deliveries racing cannot move the row backwards.
    let r = rank(status);
    let newer = Condition::any().add(C::StatusRank.lt(r)).add(
        Condition::all()
            .add(C::StatusRank.eq(r))
            .add(C::UpdatedAt.lte(micros(at))),
    );
    let updated = job_history::Entity::update_many()
        .set(job_history::ActiveModel {
            id: NotSet,
            created_at: NotSet,
            // A user's clearing of the job stays; who canceled it stays unless this event says.
            deleted_at: NotSet,
            canceled_by: if job.canceled_by.is_some() {
                row.canceled_by.clone()
            } else {
                NotSet
            },
            cancel_reason: if job.canceled_by.is_some() {
                row.cancel_reason.clone()
            } else {
                NotSet
            },
            ..row
        })
        .filter(C::Id.eq(job.job_id.chars().take(64).collect::<String>()))
        .filter(newer)
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// A list query, already validated.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub cursor: Option<(DateTime<Utc>, String)>,
    pub limit: u64,
    pub statuses: Vec<String>,
    pub kind: Option<String>,
    pub user_id: Option<String>,
    pub collection_id: Option<String>,
    pub created_after: Option<DateTime<Utc>>,
    /// Leave out the jobs their user cleared (the user's own list).
    pub hide_deleted: bool,
}

/// One page, newest first, and the cursor of the next one (none on the last page).
pub struct Page {
    pub jobs: Vec<job_history::Model>,
    pub next: Option<(DateTime<Utc>, String)>,
}

/// The oldest creation time a read covers: `created_after` (seven days back by default),
/// never older than the retention, so rows past it are not answered before they are pruned.
fn since(created_after: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let at = now();
    created_after
        .unwrap_or(at - DEFAULT_WINDOW)
        .max(at - RETENTION)
}

pub async fn list(db: &DatabaseConnection, q: &Query) -> ApiResult<Page> {
    let limit = match q.limit {
        0 => DEFAULT_LIMIT,
        n => n.min(MAX_LIMIT),
    };
    let mut find = job_history::Entity::find().filter(C::CreatedAt.gte(since(q.created_after)));
    if !q.statuses.is_empty() {
        find = find.filter(C::Status.is_in(q.statuses.iter().cloned()));
    }
    for (column, value) in [
        (C::Kind, &q.kind),
        (C::UserId, &q.user_id),
        (C::CollectionId, &q.collection_id),
    ] {
        if let Some(v) = value {
            find = find.filter(column.eq(v.clone()));
        }
    }
    if q.hide_deleted {
        find = find.filter(C::DeletedAt.is_null());
    }
    if let Some((at, id)) = &q.cursor {
        find = find.filter(
            Condition::any().add(C::CreatedAt.lt(*at)).add(
                Condition::all()
                    .add(C::CreatedAt.eq(*at))
                    .add(C::Id.lt(id.clone())),
            ),
        );
    }
    let mut jobs = find
        .order_by_desc(C::CreatedAt)
        .order_by_desc(C::Id)
        .limit(limit + 1)
        .all(db)
        .await?;
    let more = jobs.len() as u64 > limit;
    jobs.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next = more
        .then(|| jobs.last().map(|j| (j.created_at, j.id.clone())))
        .flatten();
    Ok(Page { jobs, next })
}

/// `user_id`'s job `id`; another user's job, or one they cleared, is not found.
pub async fn own(
    db: &DatabaseConnection,
    user_id: &str,
    id: &str,
) -> ApiResult<job_history::Model> {
    job_history::Entity::find_by_id(id.to_owned())
        .filter(C::UserId.eq(user_id))
        .filter(C::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))
}

/// Records a job already finished for its user (`job.user_id`): one the gateway ran before
/// answering. Answers its row.
pub async fn record_finished(
    db: &DatabaseConnection,
    job: JobChanged,
) -> ApiResult<job_history::Model> {
    if !matches!(job.status.as_str(), "completed" | "failed") {
        return Err(ApiError::bad_request(format!(
            "a recorded job is completed or failed, not {:?}",
            job.status
        )));
    }
    record(db, now(), &job).await?;
    own(db, &job.user_id, &job.job_id).await
}

/// Clears `user_id`'s finished job `id` from their list: the row stays (with `deleted_at`)
/// for the administrator's history and stats. A job still queued or running is a conflict
/// (cancel it first); the update is conditional on the row being finished, so an event
/// racing it cannot leave a running job cleared.
pub async fn delete_own(db: &DatabaseConnection, user_id: &str, id: &str) -> ApiResult<()> {
    let job = own(db, user_id, id).await?;
    let updated = job_history::Entity::update_many()
        .col_expr(C::DeletedAt, Expr::value(Some(micros(now()))))
        .filter(C::Id.eq(job.id.clone()))
        .filter(C::StatusRank.eq(rank("completed")))
        .filter(C::DeletedAt.is_null())
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        return Err(ApiError::conflict(format!(
            "job {id} is {}: cancel it before deleting it",
            job.status
        )));
    }
    Ok(())
}

/// Rows per status created since `created_after` (every status present, zeros included).
pub async fn stats(
    db: &DatabaseConnection,
    created_after: Option<DateTime<Utc>>,
) -> ApiResult<BTreeMap<String, u64>> {
    let rows: Vec<(String, i64)> = job_history::Entity::find()
        .select_only()
        .column(C::Status)
        .column_as(Expr::col(C::Id).count(), "n")
        .filter(C::CreatedAt.gte(since(created_after)))
        .group_by(C::Status)
        .into_tuple()
        .all(db)
        .await?;
    let mut by_status: BTreeMap<String, u64> =
        STATUSES.iter().map(|s| ((*s).to_owned(), 0)).collect();
    for (status, n) in rows {
        *by_status.entry(status).or_default() += u64::try_from(n).unwrap_or(0);
    }
    Ok(by_status)
}

/// Seconds from start (or creation) to finish (or now, while the job runs).
pub fn duration_seconds(job: &job_history::Model, at: DateTime<Utc>) -> f64 {
    let start = job.started_at.unwrap_or(job.created_at);
    let end = job.finished_at.unwrap_or(if job.status_rank == 2 {
        job.updated_at
    } else {
        at
    });
    ((end - start).num_microseconds().unwrap_or(0) as f64 / 1e6).max(0.0)
}

pub fn errors_of(job: &job_history::Model) -> Vec<String> {
    serde_json::from_str(&job.errors).unwrap_or_default()
}

/// How often expired rows are deleted as events arrive (not on every event: the delete
/// scans the table).
const PRUNE_EVERY_SECONDS: i64 = 300;

/// Consumes `job.*` into the history, and prunes it past [`RETENTION`] as events arrive.
pub struct JobHistoryIngest {
    db: DatabaseConnection,
    /// When expired rows were last deleted (Unix seconds; 0: not yet).
    pruned_at: std::sync::atomic::AtomicI64,
}

impl JobHistoryIngest {
    pub fn new(db: DatabaseConnection) -> JobHistoryIngest {
        JobHistoryIngest {
            db,
            pruned_at: std::sync::atomic::AtomicI64::new(0),
        }
    }

    async fn prune_if_due(&self) -> ApiResult<()> {
        use std::sync::atomic::Ordering;
        let at = now().timestamp();
        let last = self.pruned_at.load(Ordering::Relaxed);
        if at - last >= PRUNE_EVERY_SECONDS
            && self
                .pruned_at
                .compare_exchange(last, at, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            prune(&self.db).await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl EventHandler for JobHistoryIngest {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if !topic_matches(topics::JOB_ANY, &event.r#type) {
            return Ok(());
        }
        let job = JobChanged::decode(event.payload.as_slice())?;
        if job.job_id.is_empty() {
            tracing::warn!(event = %event.id, "job event without a job id; not recorded");
            return Ok(());
        }
        self.prune_if_due()
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let at = event.time.as_ref().map(from_proto).unwrap_or_else(now);
        record(&self.db, at, &job)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_rank_and_normalize() {
        assert!(rank("queued") < rank("running") && rank("running") < rank("failed"));
        assert_eq!(normalize("cancelled"), "canceled");
        assert_eq!(normalize("weird"), "unknown");
        assert_eq!(display_name("ingest_upload"), "Ingest upload");
    }
}
