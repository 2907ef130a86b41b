//! The worker loop: claims a job within its owner's concurrency cap, holds its lease with a
//! heartbeat while it runs, and settles how it ended (done, lost, failed, timed out, handed
//! back at shutdown); stale jobs of dead workers go back to the queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration as StdDuration;

use chrono::Duration;
use docchat_common::error::ApiResult;
use docchat_common::outbox;
use docchat_common::time::now;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Workers;
use super::store::Outcome;
use crate::costs;
use crate::entities::jobs;
use crate::jobs as jobq;

/// Why a job's work was dropped before it ended on its own.
enum Stopped {
    /// The row is no longer this attempt's: canceled, or the lease went elsewhere.
    Lost,
    /// This replica is shutting down.
    Shutdown,
    /// It ran past [`WorkerConfig::budget`](super::WorkerConfig::budget).
    Budget,
}

/// How much a job's progress moves before the job history is told (a tenth of the job).
const PROGRESS_STEP: f64 = 0.1;

impl Workers {
    fn lease(&self) -> Duration {
        Duration::milliseconds(i64::try_from(self.config.lease.as_millis()).unwrap_or(60_000))
    }

    async fn cap_for(&self, owner: &str) -> Option<i64> {
        match self.settings.resolve_user("ingest-worker", owner).await {
            Ok(resolved) => resolved.limit("crawl_max_concurrent_per_user"),
            Err(e) => {
                tracing::warn!(error = %e.message, "cannot resolve settings, using the default crawl cap");
                Some(self.config.fallback_cap)
            }
        }
    }

    /// The next job this worker may run, claimed.
    pub async fn claim(&self) -> ApiResult<Option<jobs::Model>> {
        for job in jobq::candidates(&self.db, 64).await? {
            let cap = self.cap_for(&job.owner_id).await;
            if jobq::try_claim(&self.db, &job, cap, self.lease()).await? {
                return Ok(jobs::Entity::find_by_id(job.id).one(&self.db).await?);
            }
        }
        Ok(None)
    }

    /// Runs worker loops until `token` is cancelled.
    pub async fn run(self, id: usize, token: CancellationToken) {
        tracing::info!(worker = id, "ingest worker started");
        loop {
            if token.is_cancelled() {
                break;
            }
            match self.claim().await {
                Ok(Some(job)) => self.process(job, &token).await,
                Ok(None) => {
                    tokio::select! {
                        () = token.cancelled() => break,
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(StdDuration::from_millis(500)) => {}
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "claiming a job failed");
                    tokio::select! {
                        () = token.cancelled() => break,
                        () = tokio::time::sleep(StdDuration::from_secs(1)) => {}
                    }
                }
            }
        }
    }

    /// Puts jobs whose worker died back in the queue: one loop per replica, twice per
    /// lease (a lapsed lease cannot be noticed sooner than that anyway).
    pub async fn recover(self, token: CancellationToken) {
        loop {
            match jobq::recover_stale(&self.db).await {
                Ok(n) if n > 0 => self.wake.notify_waiters(),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.message, "recovering stale jobs failed"),
            }
            if let Err(e) = crate::metrics::read_queue(&self.db).await {
                tracing::debug!(error = %e, "reading the job queue's depth failed");
            }
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(self.config.lease / 2) => {}
            }
        }
    }

    async fn process(&self, job: jobs::Model, token: &CancellationToken) {
        let progress = Arc::new(AtomicU64::new(0f64.to_bits()));
        let lost = CancellationToken::new();
        #[expect(
            clippy::disallowed_methods,
            reason = "the job's heartbeat, aborted when the job ends"
        )]
        let heartbeat = {
            let db = self.db.clone();
            let id = job.id.clone();
            let lease = self.lease();
            let every = self.config.lease / 3;
            let progress = progress.clone();
            let lost = lost.clone();
            tokio::spawn(async move {
                // The job history hears of progress in steps of PROGRESS_STEP at most once a
                // heartbeat, not of every renewal.
                let mut announced = 0.0;
                loop {
                    tokio::time::sleep(every).await;
                    let p = f64::from_bits(progress.load(Ordering::Relaxed));
                    let announce = p - announced >= PROGRESS_STEP;
                    match jobq::renew(&db, &id, lease, p, announce).await {
                        Ok(true) if announce => announced = p,
                        Ok(true) => {}
                        Ok(false) => {
                            lost.cancel();
                            return;
                        }
                        Err(e) => tracing::warn!(error = %e.message, "renewing a job lease failed"),
                    }
                }
            })
        };
        // Cancelled on this replica: stop at once rather than at the next heartbeat.
        let _registered = self.running.register(&job.id, &lost);
        let _running = crate::metrics::running();
        // The model calls made for the job: booked with the document when it is stored,
        // else with the failure, else on their own.
        let mut calls = Vec::new();
        // The job continues the trace of the request that queued it.
        let span =
            tracing::info_span!("ingest.job", job_id = %job.id, collection_id = %job.collection_id);
        docchat_common::telemetry::set_parent_from_map(&span, &jobq::trace_context_of(&job));
        let result = tokio::select! {
            r = self.ingest(&job, &progress, &mut calls).instrument(span) => Ok(r),
            () = lost.cancelled() => Err(Stopped::Lost),
            () = token.cancelled() => Err(Stopped::Shutdown),
            () = tokio::time::sleep(self.config.budget) => Err(Stopped::Budget),
        };
        heartbeat.abort();
        let usage = costs::events(&calls);
        crate::metrics::job_ended(match &result {
            Ok(Ok(Outcome::Done)) => "done",
            Ok(Ok(Outcome::Lost)) | Err(Stopped::Lost) => "lost",
            Err(Stopped::Shutdown) => "requeued",
            Err(Stopped::Budget) => "timeout",
            Ok(Err(_)) => "failed",
        });
        match result {
            Ok(Ok(Outcome::Done)) => tracing::info!(job_id = %job.id, "ingestion completed"),
            Ok(Ok(Outcome::Lost)) => {
                tracing::warn!(job_id = %job.id, "the job was no longer ours at commit (canceled or lease lost); nothing stored");
            }
            Err(Stopped::Lost) => {
                tracing::info!(job_id = %job.id, "the job is no longer ours (canceled, or its lease went to another worker); stopped");
            }
            Err(Stopped::Shutdown) => {
                // Shutting down: hand the job back now rather than after the lease lapses.
                if let Err(e) = requeue(&self.db, &job).await {
                    tracing::warn!(job_id = %job.id, error = %e.message, "could not requeue the job");
                }
            }
            Err(Stopped::Budget) => {
                tracing::info!(job_id = %job.id, "ingestion ran past its budget");
                match jobq::time_out(&self.db, &job.id, job.attempts, self.config.budget, &usage)
                    .await
                {
                    Ok(()) => return,
                    Err(e2) => {
                        tracing::error!(job_id = %job.id, error = %e2.message, "could not record the timeout");
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::info!(job_id = %job.id, reason = %e.message, "ingestion failed");
                match jobq::fail(&self.db, &job.id, &e.message, &usage).await {
                    Ok(()) => return,
                    Err(e2) => {
                        tracing::error!(job_id = %job.id, error = %e2.message, "could not record the failure");
                    }
                }
            }
        }
        if !usage.is_empty()
            && let Err(e) = outbox::enqueue_all(&self.db, &usage).await
        {
            tracing::error!(job_id = %job.id, error = %e, "could not book the job's model calls");
        }
    }
}

/// Hands a running job back to the queue (graceful shutdown).
async fn requeue(db: &DatabaseConnection, job: &jobs::Model) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    let updated = jobs::Entity::update_many()
        .col_expr(
            jobs::Column::Status,
            sea_orm::sea_query::Expr::value("queued"),
        )
        .col_expr(
            jobs::Column::Progress,
            sea_orm::sea_query::Expr::value(0.0f64),
        )
        .col_expr(
            jobs::Column::LeaseUntil,
            sea_orm::sea_query::Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .col_expr(
            jobs::Column::Attempts,
            sea_orm::sea_query::Expr::col(jobs::Column::Attempts).sub(1),
        )
        .col_expr(
            jobs::Column::UpdatedAt,
            sea_orm::sea_query::Expr::value(now()),
        )
        .filter(jobs::Column::Id.eq(job.id.clone()))
        .filter(jobs::Column::Status.eq("running"))
        .filter(jobs::Column::Attempts.eq(job.attempts))
        .exec(&txn)
        .await?;
    if updated.rows_affected == 1
        && let Some(row) = jobs::Entity::find_by_id(job.id.clone()).one(&txn).await?
    {
        jobq::announce(&txn, &row).await?;
    }
    txn.commit().await?;
    Ok(())
}
