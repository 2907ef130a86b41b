//! Ingestion jobs. The row is the truth: workers claim queued rows (standard queue before
//! deprioritized, oldest first, never past a user's crawl_max_concurrent_per_user), hold a
//! lease they renew while working, and a lapsed lease puts the job back in the queue. Every
//! change is announced as `job.<status>` through the outbox.

use chrono::Duration;
use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::bus::topics;
use docchat_common::error::{ApiError, ApiResult};
pub use docchat_common::error::{ERROR_LINE_BYTES, error_line};
use docchat_common::outbox;
use docchat_common::time::{now, opt_to_proto, to_proto};
use docchat_proto::events::v1::{JobChanged, WorkAvailable};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set, Statement,
};
use serde::{Deserialize, Serialize};

use crate::entities::jobs;

pub use docchat_common::jobs::KIND_INGEST_UPLOAD;
pub const STANDARD: &str = "standard";
pub const DEPRIORITIZED: &str = "deprioritized";
/// A job whose worker died this many times is `stale` instead of running again.
pub const MAX_ATTEMPTS: i32 = 3;
pub const QUEUED: &str = "queued";
pub const RUNNING: &str = "running";
pub const FAILED: &str = "failed";
pub const CANCELED: &str = "canceled";
/// Ran past its budget ([`time_out`]).
pub const TIMEOUT: &str = "timeout";
/// Its lease lapsed [`MAX_ATTEMPTS`] times and it was not retried.
pub const STALE: &str = "stale";

/// Options of an ingestion job.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IngestParams {
    pub gen_doc_summaries: bool,
    pub gen_doc_questions: bool,
    /// Text recognition of scanned pages and images (jobs queued before it: `auto`).
    #[serde(default)]
    pub ocr: OcrMode,
    /// Tesseract's languages (`eng+deu`); empty: the configured default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ocr_language: String,
}

/// How an upload asks for recognition: the ingest query's `ocr_model` (h2oGPTe's name for
/// it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OcrMode {
    /// Scanned pages (a PDF page whose text layer is too thin for its images) and
    /// images.
    #[default]
    Auto,
    /// No recognition: scanned pages stay without text, images are refused.
    Off,
    /// Every page of a PDF is recognized, text layer or not (a PDF whose text layer is
    /// garbage), and images.
    Force,
}

impl OcrMode {
    /// `auto` (or nothing), `off`, or `tesseract` (recognize every page); any case.
    ///
    /// # Errors
    ///
    /// Another name, with the accepted ones.
    pub fn parse(name: &str) -> Result<OcrMode, String> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(OcrMode::Auto),
            "off" => Ok(OcrMode::Off),
            "tesseract" | "force" => Ok(OcrMode::Force),
            _ => Err(format!(
                "ocr_model {:?} is not available: use auto (scanned pages and images), \
                 tesseract (every page) or off",
                name.trim()
            )),
        }
    }
}

/// A job's stored parameters: its options, and the trace context of the request that made
/// it, so the worker that runs it continues that trace (read back as [`IngestParams`]
/// alone where the trace does not matter: serde ignores the extra field).
#[derive(Serialize, Deserialize)]
struct StoredParams<'a> {
    #[serde(flatten)]
    params: std::borrow::Cow<'a, IngestParams>,
    #[serde(default, skip_serializing_if = "std::collections::HashMap::is_empty")]
    trace_context: std::collections::HashMap<String, String>,
}

/// The trace context a job was queued under (empty for jobs queued before it was kept).
pub fn trace_context_of(job: &jobs::Model) -> std::collections::HashMap<String, String> {
    serde_json::from_str::<StoredParams<'_>>(&job.params)
        .map(|p| p.trace_context)
        .unwrap_or_default()
}

pub fn errors_of(job: &jobs::Model) -> Vec<String> {
    serde_json::from_str(&job.errors).unwrap_or_default()
}

fn changed(job: &jobs::Model) -> docchat_proto::events::v1::Envelope {
    envelope(
        &topics::job(&job.status),
        &job.owner_id,
        &JobChanged {
            job_id: job.id.clone(),
            kind: job.kind.clone(),
            status: job.status.clone(),
            progress: job.progress,
            errors: errors_of(job),
            user_id: job.owner_id.clone(),
            username: job.owner_username.clone(),
            collection_id: job.collection_id.clone(),
            collection_name: job.collection_name.clone(),
            created_at: Some(to_proto(job.created_at)),
            started_at: opt_to_proto(job.started_at),
            finished_at: opt_to_proto(job.finished_at),
            canceled_by: job.canceled_by.clone(),
            cancel_reason: job.cancel_reason.clone(),
            name: String::new(),
        },
    )
}

/// Announces a job's new state inside the caller's transaction.
pub async fn announce<C: ConnectionTrait>(
    conn: &C,
    job: &jobs::Model,
) -> Result<(), sea_orm::DbErr> {
    outbox::enqueue(conn, &changed(job)).await
}

/// Deployment-time crawl fairness (environment, not runtime settings).
#[derive(Debug, Clone, Copy)]
pub struct Fairness {
    pub enabled: bool,
    pub fresh_window_minutes: i64,
    pub heavy_user_jobs_threshold: u64,
}

/// The queue a new job of `owner` joins: users with many recent jobs go to the
/// deprioritized queue.
pub async fn queue_for(
    db: &DatabaseConnection,
    owner: &str,
    fairness: Fairness,
) -> ApiResult<&'static str> {
    Ok(queues_for(db, owner, fairness, 1)
        .await?
        .pop()
        .unwrap_or(STANDARD))
}

/// The queues `n` new jobs of `owner` join, in order: each as [`queue_for`] would place it
/// after the ones before it were queued.
pub async fn queues_for(
    db: &DatabaseConnection,
    owner: &str,
    fairness: Fairness,
    n: usize,
) -> ApiResult<Vec<&'static str>> {
    if !fairness.enabled {
        return Ok(vec![STANDARD; n]);
    }
    let since = now() - Duration::minutes(fairness.fresh_window_minutes.max(0));
    let recent = jobs::Entity::find()
        .filter(jobs::Column::OwnerId.eq(owner))
        .filter(jobs::Column::CreatedAt.gte(since))
        .count(db)
        .await?;
    Ok((recent..)
        .take(n)
        .map(|recent| {
            if recent >= fairness.heavy_user_jobs_threshold {
                DEPRIORITIZED
            } else {
                STANDARD
            }
        })
        .collect())
}

/// A new queued ingestion job, written with its announcement and the workers' doorbell.
pub async fn enqueue<C: ConnectionTrait>(
    conn: &C,
    caller: &Caller,
    queue: &str,
    collection_id: &str,
    collection_name: &str,
    upload_id: &str,
    params: &IngestParams,
) -> ApiResult<jobs::Model> {
    let at = now();
    let job = jobs::ActiveModel {
        id: Set(docchat_common::ids::new_id()),
        kind: Set(KIND_INGEST_UPLOAD.to_owned()),
        owner_id: Set(caller.user_id.clone()),
        owner_username: Set(caller.username.clone()),
        status: Set("queued".to_owned()),
        queue: Set(queue.to_owned()),
        progress: Set(0.0),
        errors: Set("[]".to_owned()),
        collection_id: Set(collection_id.to_owned()),
        collection_name: Set(collection_name.to_owned()),
        upload_id: Set(Some(upload_id.to_owned())),
        document_id: Set(None),
        params: Set(serde_json::to_string(&StoredParams {
            params: std::borrow::Cow::Borrowed(params),
            trace_context: docchat_common::telemetry::current_context_map(),
        })
        .map_err(|e| ApiError::internal("job params", e))?),
        attempts: Set(0),
        lease_until: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
        started_at: Set(None),
        finished_at: Set(None),
        canceled_by: Set(None),
        cancel_reason: Set(None),
    }
    .insert(conn)
    .await?;
    announce(conn, &job).await?;
    outbox::enqueue(
        conn,
        &envelope(
            &topics::ingest_work(queue),
            &caller.user_id,
            &WorkAvailable {
                job_id: job.id.clone(),
            },
        ),
    )
    .await?;
    Ok(job)
}

pub async fn get(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<jobs::Model> {
    jobs::Entity::find_by_id(id.to_owned())
        .filter(jobs::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))
}

/// Claims `job_id` if it is still queued and its owner runs fewer than `cap` jobs. The
/// check and the claim are one statement (serialized per user on PostgreSQL by an advisory
/// lock), so the cap holds across workers and replicas.
pub async fn try_claim(
    db: &DatabaseConnection,
    job: &jobs::Model,
    cap: Option<i64>,
    lease: Duration,
) -> ApiResult<bool> {
    let at = now();
    let until = at + lease;
    let backend = db.get_database_backend();
    let cap = cap.unwrap_or(i64::MAX);
    let txn = docchat_common::db::begin(db).await?;
    let sql = match backend {
        DbBackend::Postgres => {
            txn.execute(Statement::from_sql_and_values(
                backend,
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                [job.owner_id.clone().into()],
            ))
            .await?;
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = $1, \
             started_at = COALESCE(started_at, $2), updated_at = $2 \
             WHERE id = $3 AND status = 'queued' AND \
             (SELECT COUNT(*) FROM jobs r WHERE r.owner_id = $4 AND r.status = 'running') < $5"
        }
        _ => {
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, \
             started_at = COALESCE(started_at, ?), updated_at = ? \
             WHERE id = ? AND status = 'queued' AND \
             (SELECT COUNT(*) FROM jobs r WHERE r.owner_id = ? AND r.status = 'running') < ?"
        }
    };
    let values: Vec<sea_orm::Value> = match backend {
        DbBackend::Postgres => vec![
            until.into(),
            at.into(),
            job.id.clone().into(),
            job.owner_id.clone().into(),
            cap.into(),
        ],
        _ => vec![
            until.into(),
            at.into(),
            at.into(),
            job.id.clone().into(),
            job.owner_id.clone().into(),
            cap.into(),
        ],
    };
    let claimed = txn
        .execute(Statement::from_sql_and_values(backend, sql, values))
        .await?
        .rows_affected()
        == 1;
    if claimed && let Some(row) = jobs::Entity::find_by_id(job.id.clone()).one(&txn).await? {
        announce(&txn, &row).await?;
    }
    txn.commit().await?;
    Ok(claimed)
}

/// Queued jobs in the order workers take them: the standard queue first, oldest first.
pub async fn candidates(db: &DatabaseConnection, limit: u64) -> ApiResult<Vec<jobs::Model>> {
    let mut rows = jobs::Entity::find()
        .filter(jobs::Column::Status.eq("queued"))
        .filter(jobs::Column::Queue.eq(STANDARD))
        .order_by_asc(jobs::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?;
    if (rows.len() as u64) < limit {
        rows.extend(
            jobs::Entity::find()
                .filter(jobs::Column::Status.eq("queued"))
                .filter(jobs::Column::Queue.eq(DEPRIORITIZED))
                .order_by_asc(jobs::Column::CreatedAt)
                .limit(limit - rows.len() as u64)
                .all(db)
                .await?,
        );
    }
    Ok(rows)
}

/// Extends a running job's lease and records its progress; with `announce`, also tells the
/// job history (a `JobChanged` in the same transaction), so an administrator sees a long job
/// move (a scanned document, page by page) and not only its start and end. `false` when the
/// job is no longer running (canceled, or its lease went to another worker).
pub async fn renew(
    db: &DatabaseConnection,
    job_id: &str,
    lease: Duration,
    progress: f64,
    announce_progress: bool,
) -> ApiResult<bool> {
    let at = now();
    let txn = docchat_common::db::begin(db).await?;
    let result = jobs::Entity::update_many()
        .col_expr(
            jobs::Column::LeaseUntil,
            sea_orm::sea_query::Expr::value(Some(at + lease)),
        )
        .col_expr(
            jobs::Column::Progress,
            sea_orm::sea_query::Expr::value(progress),
        )
        .col_expr(jobs::Column::UpdatedAt, sea_orm::sea_query::Expr::value(at))
        .filter(jobs::Column::Id.eq(job_id))
        .filter(jobs::Column::Status.eq("running"))
        .exec(&txn)
        .await?;
    let renewed = result.rows_affected == 1;
    if renewed
        && announce_progress
        && let Some(row) = jobs::Entity::find_by_id(job_id.to_owned())
            .one(&txn)
            .await?
    {
        announce(&txn, &row).await?;
    }
    txn.commit().await?;
    Ok(renewed)
}

/// Puts running jobs whose lease lapsed (their worker died) back in the queue, or marks
/// them `stale` after [`MAX_ATTEMPTS`] (the lease could not be recovered).
pub async fn recover_stale(db: &DatabaseConnection) -> ApiResult<u64> {
    let at = now();
    let stale = jobs::Entity::find()
        .filter(jobs::Column::Status.eq("running"))
        .filter(jobs::Column::LeaseUntil.lt(at))
        .all(db)
        .await?;
    let mut n = 0;
    for job in stale {
        let txn = docchat_common::db::begin(db).await?;
        let give_up = job.attempts >= MAX_ATTEMPTS;
        let mut active: jobs::ActiveModel = job.clone().into();
        active.lease_until = Set(None);
        active.updated_at = Set(at);
        if give_up {
            let mut errors = errors_of(&job);
            errors.push(error_line(&format!(
                "stale: the job's lease lapsed {} times (its worker stopped each time); not retried",
                job.attempts
            )));
            active.status = Set(STALE.into());
            active.finished_at = Set(Some(at));
            active.errors = Set(serde_json::to_string(&errors).unwrap_or_else(|_| "[]".into()));
        } else {
            active.status = Set("queued".into());
            active.progress = Set(0.0);
        }
        // Only if nobody touched it meanwhile.
        let updated = jobs::Entity::update_many()
            .set(active)
            .filter(jobs::Column::Id.eq(job.id.clone()))
            .filter(jobs::Column::Status.eq("running"))
            .filter(jobs::Column::LeaseUntil.lt(at))
            .exec(&txn)
            .await?;
        if updated.rows_affected == 1 {
            if let Some(row) = jobs::Entity::find_by_id(job.id.clone()).one(&txn).await? {
                announce(&txn, &row).await?;
            }
            n += 1;
            tracing::warn!(job_id = %job.id, gave_up = give_up, "recovered a job whose worker stopped");
        }
        txn.commit().await?;
    }
    Ok(n)
}

/// Marks a running job failed with a one-line reason; `usage` (the model calls it made)
/// is booked in the same transaction, whatever the job's state.
pub async fn fail(
    db: &DatabaseConnection,
    job_id: &str,
    reason: &str,
    usage: &[docchat_proto::events::v1::Envelope],
) -> ApiResult<()> {
    end(db, job_id, None, FAILED, reason, usage).await
}

/// Marks a running job `timeout` (it ran past its budget), if `attempt` still holds it.
pub async fn time_out(
    db: &DatabaseConnection,
    job_id: &str,
    attempt: i32,
    budget: std::time::Duration,
    usage: &[docchat_proto::events::v1::Envelope],
) -> ApiResult<()> {
    let reason = format!(
        "timeout: the job ran past its budget of {} s and was stopped",
        budget.as_secs()
    );
    end(db, job_id, Some(attempt), TIMEOUT, &reason, usage).await
}

/// Ends a running job (of `attempt`, if given) with `status` and a one-line reason; the
/// update is conditional on the row still running, so a cancel or a completion that came
/// first wins.
async fn end(
    db: &DatabaseConnection,
    job_id: &str,
    attempt: Option<i32>,
    status: &str,
    reason: &str,
    usage: &[docchat_proto::events::v1::Envelope],
) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    outbox::enqueue_all(&txn, usage).await?;
    let Some(job) = jobs::Entity::find_by_id(job_id.to_owned())
        .one(&txn)
        .await?
    else {
        txn.commit().await?;
        return Ok(());
    };
    if job.status != RUNNING || attempt.is_some_and(|a| a != job.attempts) {
        txn.commit().await?;
        return Ok(());
    }
    let mut errors = errors_of(&job);
    errors.push(error_line(reason));
    let at = now();
    let updated = jobs::Entity::update_many()
        .col_expr(jobs::Column::Status, Expr::value(status))
        .col_expr(
            jobs::Column::Errors,
            Expr::value(serde_json::to_string(&errors).unwrap_or_else(|_| "[]".into())),
        )
        .col_expr(jobs::Column::FinishedAt, Expr::value(Some(at)))
        .col_expr(jobs::Column::UpdatedAt, Expr::value(at))
        .col_expr(
            jobs::Column::LeaseUntil,
            Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .filter(jobs::Column::Id.eq(job_id))
        .filter(jobs::Column::Status.eq(RUNNING))
        .filter(jobs::Column::Attempts.eq(job.attempts))
        .exec(&txn)
        .await?;
    if updated.rows_affected == 1
        && let Some(row) = jobs::Entity::find_by_id(job_id.to_owned())
            .one(&txn)
            .await?
    {
        announce(&txn, &row).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Who cancels a job, and whether they may cancel another user's.
pub struct Cancel<'a> {
    pub caller: &'a Caller,
    /// One line, at most [`ERROR_LINE_BYTES`]; empty for none.
    pub reason: &'a str,
    pub any_owner: bool,
}

/// Cancels a queued or running job: one conditional update, so it and the worker's fenced
/// completion cannot both win. The worker notices at its next heartbeat (or at once on this
/// replica) and stops; its completion, should it get there, finds the row no longer running
/// and stores nothing. Another user's job is not found; a finished one is a conflict.
pub async fn cancel(db: &DatabaseConnection, id: &str, who: &Cancel<'_>) -> ApiResult<jobs::Model> {
    let mut find = jobs::Entity::find_by_id(id.to_owned());
    if !who.any_owner {
        find = find.filter(jobs::Column::OwnerId.eq(who.caller.user_id.clone()));
    }
    let not_found = || ApiError::not_found(format!("job {id} not found"));
    let job = find.one(db).await?.ok_or_else(not_found)?;
    let reason = error_line(who.reason);
    let at = now();
    let txn = docchat_common::db::begin(db).await?;
    let updated = jobs::Entity::update_many()
        .col_expr(jobs::Column::Status, Expr::value(CANCELED))
        .col_expr(jobs::Column::FinishedAt, Expr::value(Some(at)))
        .col_expr(jobs::Column::UpdatedAt, Expr::value(at))
        .col_expr(
            jobs::Column::LeaseUntil,
            Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .col_expr(
            jobs::Column::CanceledBy,
            Expr::value(Some(who.caller.username.clone())),
        )
        .col_expr(
            jobs::Column::CancelReason,
            Expr::value((!reason.is_empty()).then_some(reason)),
        )
        .filter(jobs::Column::Id.eq(job.id.clone()))
        .filter(jobs::Column::Status.is_in([QUEUED, RUNNING]))
        .exec(&txn)
        .await?;
    let row = jobs::Entity::find_by_id(job.id.clone())
        .one(&txn)
        .await?
        .ok_or_else(not_found)?;
    if updated.rows_affected != 1 {
        txn.rollback().await?;
        return Err(ApiError::conflict(format!(
            "job {id} already finished ({}); there is nothing to cancel",
            row.status
        )));
    }
    announce(&txn, &row).await?;
    txn.commit().await?;
    tracing::info!(job_id = %row.id, by = %who.caller.username, "job canceled");
    Ok(row)
}

/// Queued jobs of every user per queue, both queues always listed.
pub async fn pending(db: &DatabaseConnection) -> ApiResult<Vec<(&'static str, u64)>> {
    let mut out = Vec::new();
    for queue in [STANDARD, DEPRIORITIZED] {
        let n = jobs::Entity::find()
            .filter(jobs::Column::Status.eq(QUEUED))
            .filter(jobs::Column::Queue.eq(queue))
            .count(db)
            .await?;
        out.push((queue, n));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{OcrMode, error_line};

    #[test]
    fn modes_are_h2ogpte_names_and_others_are_refused() {
        assert_eq!(OcrMode::parse(""), Ok(OcrMode::Auto));
        assert_eq!(OcrMode::parse("AUTO"), Ok(OcrMode::Auto));
        assert_eq!(OcrMode::parse("off"), Ok(OcrMode::Off));
        assert_eq!(OcrMode::parse("tesseract"), Ok(OcrMode::Force));
        let e = OcrMode::parse("docTR").unwrap_err();
        assert!(e.contains("docTR") && e.contains("tesseract"), "{e}");
    }

    #[test]
    fn error_lines_are_one_line_and_bounded() {
        assert_eq!(error_line("bad file\nstack trace here"), "bad file");
        let long = "é".repeat(400);
        let line = error_line(&long);
        assert!(line.len() <= 300);
        assert!(line.chars().all(|c| c == 'é'));
    }
}
