//! The hard cap chat_max_concurrent_per_user: completions being generated are rows of
//! `active_completions`, claimed in the transaction that stores the question and released
//! in the one that stores the reply, so the count holds across every replica.
//!
//! Claims of one user are serialized: on SQLite by chat-service's single connection (one
//! transaction at a time, see `db::connect_serialized`), on PostgreSQL — across replicas —
//! by a transaction-scoped advisory lock on the user. A row's lease is renewed
//! while its generation lives on this replica ([`renew_leases`]); rows of a replica that
//! died stop counting when their lease runs out.

use std::time::Duration;

use chrono::{DateTime, Utc};
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::time::now;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, EntityTrait,
    PaginatorTrait, QueryFilter, Set, Statement,
};
use tokio_util::sync::CancellationToken;

use crate::control::Controls;
use crate::entities::active_completions;

/// How long a claim counts without renewal.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often a replica renews the leases of its generations.
const RENEW_EVERY: Duration = Duration::from_secs(20);

fn lease_until(at: DateTime<Utc>) -> DateTime<Utc> {
    at + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::seconds(60))
}

/// Claims a slot for `question_id` inside `txn`, or refuses (429) when `user_id` already
/// has `cap` completions running. `cap` None is unlimited (still recorded, so lowering the
/// cap takes effect on what runs).
pub async fn claim(
    txn: &DatabaseTransaction,
    user_id: &str,
    question_id: &str,
    cap: Option<i64>,
) -> ApiResult<()> {
    let at = now();
    if let Some(cap) = cap {
        if txn.get_database_backend() == DbBackend::Postgres {
            txn.execute(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                [format!("chat.active:{user_id}").into()],
            ))
            .await?;
        }
        let running = active_completions::Entity::find()
            .filter(active_completions::Column::UserId.eq(user_id))
            .filter(active_completions::Column::LeaseUntil.gt(at))
            .count(txn)
            .await?;
        if i64::try_from(running).unwrap_or(i64::MAX) >= cap {
            return Err(ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "too many chats at once: {running} completions are running and chat_max_concurrent_per_user is {cap}; wait for one to finish"
                ),
            ));
        }
    }
    active_completions::Entity::insert(active_completions::ActiveModel {
        question_id: Set(question_id.to_owned()),
        user_id: Set(user_id.to_owned()),
        started_at: Set(at),
        lease_until: Set(lease_until(at)),
    })
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// Releases the slot of `question_id` (idempotent).
pub async fn release(conn: &impl ConnectionTrait, question_id: &str) -> ApiResult<()> {
    active_completions::Entity::delete_many()
        .filter(active_completions::Column::QuestionId.eq(question_id))
        .exec(conn)
        .await?;
    Ok(())
}

/// Renews the leases of the generations running on this replica, and forgets rows whose
/// lease ran out long ago, until `shutdown`.
pub async fn renew_leases(db: DatabaseConnection, controls: Controls, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(RENEW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = renew_once(&db, &controls).await {
            tracing::warn!(error = %e.message, "renewing completion leases failed");
        }
    }
}

pub async fn renew_once(db: &DatabaseConnection, controls: &Controls) -> ApiResult<()> {
    let at = now();
    let running = controls.running_ids();
    for ids in running.chunks(500) {
        active_completions::Entity::update_many()
            .col_expr(
                active_completions::Column::LeaseUntil,
                sea_orm::sea_query::Expr::value(lease_until(at)),
            )
            .filter(active_completions::Column::QuestionId.is_in(ids.iter().cloned()))
            .exec(db)
            .await?;
    }
    active_completions::Entity::delete_many()
        .filter(active_completions::Column::LeaseUntil.lt(at - chrono::Duration::hours(1)))
        .exec(db)
        .await?;
    Ok(())
}
