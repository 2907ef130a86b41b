//! Run leases (table run_leases): an agent run holds a row from its start to its end, written
//! in the transactions that announce its job; the replica running it renews the lease every
//! third of `DOCCHAT_JOB_LEASE_SECONDS`. A replica that dies mid-run leaves its rows to lapse,
//! and any replica's reaper ends each such job `stale` ("the agent-service replica running it
//! stopped"), so the job history never keeps a run running for ever. A run that ends after
//! its row was reaped still announces its end, which the history takes (same rank, newer).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::bus::{envelope, topics};
use docchat_common::error::error_line;
use docchat_common::jobs::KIND_AGENT_RUN;
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::time::{from_proto, now, to_proto};
use docchat_proto::events::v1::JobChanged;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use tokio_util::sync::CancellationToken;

use crate::entities::run_leases::{self, Column};

/// The error of a run whose replica stopped renewing its lease.
pub const LAPSED: &str = "the agent-service replica running it stopped";

/// Rows reaped per look.
const REAP_BATCH: u64 = 100;

/// This replica's leases.
pub struct Leases {
    worker: String,
    lease: chrono::Duration,
    held: Mutex<HashSet<String>>,
}

impl Leases {
    /// Leases of `lease` length held by a replica named `worker`.
    pub fn new(worker: impl Into<String>, lease: Duration) -> Arc<Leases> {
        Arc::new(Leases {
            worker: worker.into(),
            lease: chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(30)),
            held: Mutex::new(HashSet::new()),
        })
    }

    fn held(&self) -> Vec<String> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    fn set_held(&self, job_id: &str, held: bool) {
        let mut all = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held {
            all.insert(job_id.to_owned());
        } else {
            all.remove(job_id);
        }
    }

    /// Takes the lease of a starting run's `job` (in the caller's transaction).
    pub(crate) async fn take<C: ConnectionTrait>(
        &self,
        conn: &C,
        job: &JobChanged,
    ) -> Result<(), DbErr> {
        let created = job.created_at.as_ref().map(from_proto).unwrap_or_else(now);
        run_leases::Entity::insert(run_leases::ActiveModel {
            job_id: Set(job.job_id.clone()),
            user_id: Set(job.user_id.clone()),
            username: Set(job.username.clone()),
            collection_id: Set(job.collection_id.clone()),
            created_at: Set(created),
            worker: Set(self.worker.clone()),
            lease_until: Set(now() + self.lease),
        })
        .exec_without_returning(conn)
        .await?;
        self.set_held(&job.job_id, true);
        Ok(())
    }

    /// Gives the lease of an ended run back (in the caller's transaction).
    pub(crate) async fn give_back<C: ConnectionTrait>(
        &self,
        conn: &C,
        job_id: &str,
    ) -> Result<(), DbErr> {
        self.set_held(job_id, false);
        run_leases::Entity::delete_by_id(job_id).exec(conn).await?;
        Ok(())
    }

    async fn renew(&self, db: &DatabaseConnection) -> Result<(), DbErr> {
        let until = now() + self.lease;
        for job_id in self.held() {
            run_leases::Entity::update_many()
                .set(run_leases::ActiveModel {
                    lease_until: Set(until),
                    ..Default::default()
                })
                .filter(Column::JobId.eq(job_id))
                .exec(db)
                .await?;
        }
        Ok(())
    }

    /// Ends the jobs whose lease lapsed as `stale`; how many.
    pub async fn reap(&self, db: &DatabaseConnection, relay: &OutboxRelay) -> Result<usize, DbErr> {
        let at = now();
        let rows = run_leases::Entity::find()
            .filter(Column::LeaseUntil.lt(at))
            .order_by_asc(Column::LeaseUntil)
            .limit(REAP_BATCH)
            .all(db)
            .await?;
        let mut reaped = 0;
        for row in rows {
            let txn = docchat_common::db::begin(db).await?;
            // Taken only if still lapsed: a lease renewed or given back meanwhile stays.
            let gone = run_leases::Entity::delete_many()
                .filter(Column::JobId.eq(row.job_id.as_str()))
                .filter(Column::LeaseUntil.lt(at))
                .exec(&txn)
                .await?
                .rows_affected;
            if gone == 0 {
                // Renewed or ended meanwhile.
                txn.rollback().await?;
                continue;
            }
            let created = row.created_at;
            let job = JobChanged {
                job_id: row.job_id.clone(),
                kind: KIND_AGENT_RUN.to_owned(),
                status: "stale".to_owned(),
                progress: 1.0,
                errors: vec![error_line(LAPSED)],
                user_id: row.user_id,
                username: row.username,
                collection_id: row.collection_id,
                created_at: Some(to_proto(created)),
                started_at: Some(to_proto(created)),
                finished_at: Some(to_proto(at)),
                ..Default::default()
            };
            outbox::enqueue(&txn, &envelope(&topics::job("stale"), &job.user_id, &job)).await?;
            txn.commit().await?;
            tracing::warn!(job_id = %row.job_id, "an agent run's lease lapsed (its replica stopped): its job is stale");
            reaped += 1;
        }
        if reaped > 0 {
            relay.notify();
        }
        Ok(reaped)
    }

    /// Renews this replica's leases and reaps lapsed ones until `token` is cancelled.
    pub async fn keep(
        self: Arc<Self>,
        db: DatabaseConnection,
        relay: OutboxRelay,
        token: CancellationToken,
    ) {
        let every = (self.lease / 3)
            .to_std()
            .unwrap_or(Duration::from_secs(10))
            .max(Duration::from_millis(100));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.renew(&db).await {
                tracing::warn!(error = %e, "renewing agent run leases failed");
            }
            if let Err(e) = self.reap(&db, &relay).await {
                tracing::warn!(error = %e, "reaping lapsed agent runs failed");
            }
        }
    }
}
