//! The hard cap chat_max_concurrent_per_user: completions being generated are rows of
//! `active_completions`, claimed in the transaction (batch) that stores the question and
//! released in the one that stores the reply, so the count holds across every replica.
//!
//! Claims of one user are serialized: on SQLite by chat-service's single connection (one
//! transaction at a time, see `db::connect_serialized`), on PostgreSQL — across replicas —
//! by a transaction-scoped advisory lock on the user. A row's lease
//! (`chat_completion_lease_seconds`) is renewed while its generation lives on this replica
//! ([`renew_leases`]), which also writes the reply's text so far into the row as it grows
//! (at most every [`PROGRESS_GAP`]); the client is sent only text already written there
//! (generate.rs), so a replica that dies leaves at least what its clients saw. Rows of a
//! replica that died stop counting when their lease runs out, and are then recovered
//! (recovery.rs). A question is being generated exactly while its row's lease holds
//! ([`is_generating`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::time::now;
use sea_orm::sea_query::{Alias, DeleteStatement, Expr, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter,
    QueryResult, QueryTrait, Set, Statement,
};
use tokio_util::sync::CancellationToken;

use crate::batch::{Batch, TAG, tag, tagged};
use crate::control::{Controls, Kind};
use crate::entities::{active_completions, background_responses};

/// The least time between two writes of the generations' text so far (what grows in the
/// meantime goes in one write): the client's deltas come in pieces at most this far apart.
pub const PROGRESS_GAP: Duration = Duration::from_millis(40);
/// How often leases are looked at when no text grows.
const RENEW_TICK: Duration = Duration::from_secs(1);

/// The lease of `chat_completion_lease_seconds`.
pub fn lease(config: &docchat_common::Config) -> Duration {
    Duration::from_secs(config.chat_completion_lease_seconds.max(1))
}

pub(crate) fn lease_until(at: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    at + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(60))
}

/// Adds to `batch` the claim of a slot for `question_id` by `user_id`: on PostgreSQL first
/// the user's advisory lock, then (when `cap` is set) the count of running completions,
/// tagged `running`, then the row. [`check_claim`] reads the count from the batch's rows;
/// the batch's transaction must roll back when it refuses. `cap` None is unlimited (still
/// recorded, so lowering the cap takes effect on what runs).
pub fn claim(
    batch: &mut Batch,
    user_id: &str,
    question_id: &str,
    cap: Option<i64>,
    lease: Duration,
) {
    let at = now();
    if cap.is_some() {
        if batch.backend() == DbBackend::Postgres {
            batch.push_statement(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                [format!("chat.active:{user_id}").into()],
            ));
        }
        batch.push(
            &Query::select()
                .expr_as(tag(RUNNING), Alias::new(TAG))
                .expr_as(
                    Expr::col(active_completions::Column::QuestionId).count(),
                    Alias::new("n"),
                )
                .from(active_completions::Entity)
                .and_where(active_completions::Column::UserId.eq(user_id))
                .and_where(active_completions::Column::LeaseUntil.gt(at))
                .to_owned(),
        );
    }
    batch.push(
        &active_completions::Entity::insert(active_completions::ActiveModel {
            question_id: Set(question_id.to_owned()),
            user_id: Set(user_id.to_owned()),
            started_at: Set(at),
            lease_until: Set(lease_until(at, lease)),
            progress: Set(None),
            usage: Set(None),
            marks: Set(None),
        })
        .into_query(),
    );
}

const RUNNING: &str = "running";

/// Refuses (429) when the rows of a batch with a [`claim`] show that `cap` completions were
/// already running.
pub fn check_claim(rows: &[QueryResult], cap: Option<i64>) -> ApiResult<()> {
    let Some(cap) = cap else {
        return Ok(());
    };
    let running = tagged(rows, RUNNING)
        .next()
        .ok_or_else(|| ApiError::internal("claiming a completion slot", "no count"))?
        .try_get::<i64>("", "n")?;
    if running >= cap {
        docchat_common::metrics::refused("chat_max_concurrent_per_user");
        return Err(ApiError::new(
            ErrorCode::TooManyRequests,
            format!(
                "too many chats at once: {running} completions are running and chat_max_concurrent_per_user is {cap}; wait for one to finish"
            ),
        ));
    }
    Ok(())
}

/// The statement releasing the slot of `question_id` (idempotent).
pub fn release_statement(question_id: &str) -> DeleteStatement {
    active_completions::Entity::delete_many()
        .filter(active_completions::Column::QuestionId.eq(question_id))
        .into_query()
}

/// Releases the slot of `question_id` (idempotent).
pub async fn release(conn: &impl ConnectionTrait, question_id: &str) -> ApiResult<()> {
    conn.execute(
        conn.get_database_backend()
            .build(&release_statement(question_id)),
    )
    .await?;
    Ok(())
}

/// Whether `question_id` is being generated (on any replica): its row's lease holds.
pub async fn is_generating(db: &DatabaseConnection, question_id: &str) -> ApiResult<bool> {
    Ok(
        active_completions::Entity::find_by_id(question_id.to_owned())
            .filter(active_completions::Column::LeaseUntil.gt(now()))
            .one(db)
            .await?
            .is_some(),
    )
}

/// Writes the text so far of the generations running on this replica that grew (at most
/// every second), and renews all their leases every third of the lease, until `shutdown`.
pub async fn renew_leases(
    db: DatabaseConnection,
    controls: Controls,
    lease: Duration,
    shutdown: CancellationToken,
) {
    let renew_every = lease / 3;
    let mut tick = tokio::time::interval(RENEW_TICK.min(renew_every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            () = controls.grown() => {}
        }
        if let Err(e) = write_progress(&db, &controls, lease).await {
            tracing::warn!(error = %e.message, "writing completion progress failed");
        }
        if renewed.elapsed() >= renew_every {
            renewed = tokio::time::Instant::now();
            if let Err(e) = renew_once(&db, &controls, lease).await {
                tracing::warn!(error = %e.message, "renewing completion leases failed");
            }
        }
        // What grows meanwhile is written together next time.
        tokio::time::sleep(PROGRESS_GAP).await;
    }
}

/// Writes the text so far of the generations that grew since the last call with where its
/// lines end (renewing their leases too), and lets each generation send its client the
/// lines now stored.
pub async fn write_progress(
    db: &DatabaseConnection,
    controls: &Controls,
    lease: Duration,
) -> ApiResult<()> {
    for grown in controls.take_progress() {
        let until = lease_until(now(), lease);
        match grown.kind {
            Kind::Completion => {
                let mut update = active_completions::Entity::update_many()
                    .col_expr(
                        active_completions::Column::Progress,
                        Expr::value(grown.text),
                    )
                    .col_expr(active_completions::Column::Marks, Expr::value(grown.marks))
                    .col_expr(active_completions::Column::LeaseUntil, Expr::value(until));
                if let Some(usage) = grown.usage {
                    update = update.col_expr(active_completions::Column::Usage, Expr::value(usage));
                }
                update
                    .filter(active_completions::Column::QuestionId.eq(grown.question_id.clone()))
                    .exec(db)
                    .await?;
            }
            Kind::Background => {
                background_responses::Entity::update_many()
                    .col_expr(
                        background_responses::Column::Progress,
                        Expr::value(grown.text),
                    )
                    .col_expr(
                        background_responses::Column::Marks,
                        Expr::value(grown.marks),
                    )
                    .col_expr(background_responses::Column::LeaseUntil, Expr::value(until))
                    .filter(background_responses::Column::Id.eq(grown.question_id.clone()))
                    .filter(background_responses::Column::ExpiresAt.is_null())
                    .exec(db)
                    .await?;
            }
        }
        controls.mark_stored(&grown.question_id, grown.lines);
    }
    Ok(())
}

/// Renews the leases of the generations running on this replica.
pub async fn renew_once(
    db: &DatabaseConnection,
    controls: &Controls,
    lease: Duration,
) -> ApiResult<()> {
    let until = lease_until(now(), lease);
    for ids in controls.running_of(Kind::Completion).chunks(500) {
        active_completions::Entity::update_many()
            .col_expr(active_completions::Column::LeaseUntil, Expr::value(until))
            .filter(active_completions::Column::QuestionId.is_in(ids.iter().cloned()))
            .exec(db)
            .await?;
    }
    for ids in controls.running_of(Kind::Background).chunks(500) {
        background_responses::Entity::update_many()
            .col_expr(background_responses::Column::LeaseUntil, Expr::value(until))
            .filter(background_responses::Column::Id.is_in(ids.iter().cloned()))
            .filter(background_responses::Column::ExpiresAt.is_null())
            .exec(db)
            .await?;
    }
    Ok(())
}
