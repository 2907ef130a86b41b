//! Leases: a replica renews the lease of every execution it runs (every third of the lease);
//! every replica's reaper fails executions whose lease lapsed — their replica died — with
//! "the scheduler replica running it stopped" (job status `stale`) and sets their task idle,
//! so no execution is left running for ever. A held execution that is no longer running in
//! the database (canceled, or its task deleted, through another replica) has its run stopped
//! at the next renewal.

use std::sync::Arc;

use docchat_common::error::ApiResult;
use docchat_common::time::now;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect};

use super::status::RUNNING;
use super::store::{self, Outcome};
use super::{Inner, notify};
use crate::entities::task_executions as executions;

/// Pushes the lease of this replica's running executions forward, and stops the runs of
/// those that ended elsewhere.
async fn renew(inner: &Inner) -> ApiResult<()> {
    let held = inner.held();
    if held.is_empty() {
        return Ok(());
    }
    executions::Entity::update_many()
        .col_expr(
            executions::Column::LeaseUntil,
            Expr::value(Some(inner.lease_until())),
        )
        .filter(executions::Column::Id.is_in(held.clone()))
        .filter(executions::Column::Status.eq(RUNNING))
        .exec(&inner.db)
        .await?;
    let running: Vec<String> = executions::Entity::find()
        .select_only()
        .column(executions::Column::Id)
        .filter(executions::Column::Id.is_in(held.clone()))
        .filter(executions::Column::Status.eq(RUNNING))
        .into_tuple()
        .all(&inner.db)
        .await?;
    for id in held.iter().filter(|id| !running.contains(id)) {
        tracing::info!(execution_id = %id, "the execution ended elsewhere (canceled or deleted); stopping its run");
        inner.stop(id);
    }
    Ok(())
}

/// Fails the executions whose lease lapsed; how many.
pub(super) async fn reap(inner: &Inner) -> ApiResult<usize> {
    let at = now();
    let lapsed = executions::Entity::find()
        .filter(executions::Column::Status.eq(RUNNING))
        .filter(executions::Column::LeaseUntil.lt(at))
        .limit(100)
        .all(&inner.db)
        .await?;
    let mut reaped = 0;
    for execution in lapsed {
        if let Some((ended, email)) =
            store::finish(&inner.db, &execution.id, Outcome::Lapsed, Some(at)).await?
        {
            reaped += 1;
            crate::metrics::ended(&ended.trigger_source, "lapsed");
            tracing::warn!(execution_id = %ended.id, worker = %execution.worker, task = %ended.task_name, "a task execution's lease lapsed: failed");
            inner.relay.notify();
            notify::send(inner.notifier.as_ref(), &email, &ended).await;
        }
    }
    Ok(reaped)
}

/// Renews this replica's leases and reaps lapsed ones until shutdown.
pub(super) async fn run_loop(inner: Arc<Inner>) {
    let renew_every = (inner.lease / 3)
        .to_std()
        .unwrap_or(std::time::Duration::from_secs(10))
        .max(std::time::Duration::from_millis(100));
    let mut renewal = tokio::time::interval(renew_every);
    let mut reaping = tokio::time::interval(inner.tick);
    reaping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = inner.token.cancelled() => return,
            _ = renewal.tick() => {
                if let Err(e) = renew(&inner).await {
                    tracing::warn!(error = %e.message, "renewing execution leases failed");
                }
            }
            _ = reaping.tick() => {
                if let Err(e) = reap(&inner).await {
                    tracing::warn!(error = %e.message, "reaping lapsed executions failed");
                }
            }
        }
    }
}
