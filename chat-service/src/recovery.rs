//! Replies whose replica died while generating them (kill -9, a lost node): their
//! `active_completions` row stays behind with the text written so far (limits.rs writes it
//! at a bounded rate) and a lease nobody renews. At start and then every half lease, each
//! replica claims such rows and stores their reply as interrupted, with what had been
//! generated, the way a reply cut short by shutdown is stored (an error saying so).
//!
//! The claim is the row's conditional delete (`lease_until` still past) in the transaction
//! that stores the reply: on PostgreSQL a second replica's delete waits for the first's
//! commit and then finds nothing; SQLite runs one writer at a time. So a reply is recovered
//! once. Its usage is booked in the same transaction, as a stored reply's is: what its
//! model calls had used, written with the progress (`active_completions.usage`,
//! completions' `Spent`), and the answer's completion counted from the recovered text; the
//! reply gets its `usage_stats` too.

use std::time::Duration;

use docchat_common::error::ApiResult;
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::time::now;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use tokio_util::sync::CancellationToken;

use crate::background;
use crate::completions::Spent;
use crate::control::{Controls, Kind};
use crate::entities::{
    active_completions, background_responses, chat_sessions, message_meta, messages,
};

/// The error stored with a recovered reply.
pub const INTERRUPTED: &str =
    "the reply was interrupted: the chat-service replica generating it stopped";
/// Rows recovered in one pass at most.
const BATCH: u64 = 100;

/// What recovery reads and writes.
pub struct Recovery {
    pub db: DatabaseConnection,
    pub controls: Controls,
    /// Told of the usage booked.
    pub relay: OutboxRelay,
    /// `chat_completion_lease_seconds`.
    pub lease: Duration,
    /// `chat_stream_retention_seconds`: how long an ended background response is kept.
    pub retention: Duration,
}

/// Recovers replies and background responses of dead replicas, and deletes background
/// responses past their retention, at start and every half lease, until `shutdown`.
pub async fn run(r: Recovery, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval((r.lease / 2).max(Duration::from_millis(500)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match recover_once(&r.db, &r.controls).await {
            Ok(0) => {}
            Ok(n) => {
                r.relay.notify();
                tracing::info!(replies = n, "recovered interrupted replies");
            }
            Err(e) => tracing::warn!(error = %e.message, "recovering interrupted replies failed"),
        }
        match recover_background(&r.db, &r.controls, r.retention).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                responses = n,
                "failed background responses of a stopped replica"
            ),
            Err(e) => tracing::warn!(error = %e.message, "recovering background responses failed"),
        }
        if let Err(e) = sweep_background(&r.db).await {
            tracing::warn!(error = %e.message, "deleting expired background responses failed");
        }
    }
}

/// Background responses whose replica stopped while generating them (their lease ran
/// out, and they do not run here) end `failed`, with the text stored so far — or
/// `cancelled` when a cancel came first. Answers how many.
pub async fn recover_background(
    db: &DatabaseConnection,
    controls: &Controls,
    retention: Duration,
) -> ApiResult<usize> {
    let at = now();
    let orphans: Vec<String> = background_responses::Entity::find()
        .select_only()
        .column(background_responses::Column::Id)
        .filter(background_responses::Column::ExpiresAt.is_null())
        .filter(background_responses::Column::LeaseUntil.lt(at))
        .limit(BATCH)
        .into_tuple()
        .all(db)
        .await?;
    let running = controls.running_of(Kind::Background);
    let orphans: Vec<String> = orphans
        .into_iter()
        .filter(|id| !running.contains(id))
        .collect();
    if orphans.is_empty() {
        return Ok(0);
    }
    let error =
        serde_json::json!({ "status": 503, "message": background::INTERRUPTED }).to_string();
    let cancelled = background_responses::Column::Status.eq(background::CANCELLED);
    let done = background_responses::Entity::update_many()
        .col_expr(
            background_responses::Column::Status,
            Expr::case(cancelled.clone(), background::CANCELLED)
                .finally(background::FAILED)
                .into(),
        )
        .col_expr(
            background_responses::Column::Error,
            Expr::case(cancelled, Expr::value(Option::<String>::None))
                .finally(error)
                .into(),
        )
        .col_expr(
            background_responses::Column::ExpiresAt,
            Expr::value(background::expiry(at, retention)),
        )
        .filter(background_responses::Column::Id.is_in(orphans))
        .filter(background_responses::Column::ExpiresAt.is_null())
        .filter(background_responses::Column::LeaseUntil.lt(at))
        .exec(db)
        .await?;
    Ok(done.rows_affected as usize)
}

/// Deletes the background responses past their retention.
pub async fn sweep_background(db: &DatabaseConnection) -> ApiResult<u64> {
    Ok(background_responses::Entity::delete_many()
        .filter(background_responses::Column::ExpiresAt.lt(now()))
        .exec(db)
        .await?
        .rows_affected)
}

/// One pass: the replies recovered.
pub async fn recover_once(db: &DatabaseConnection, controls: &Controls) -> ApiResult<usize> {
    let expired = active_completions::Entity::find()
        .filter(active_completions::Column::LeaseUntil.lt(now()))
        .order_by_asc(active_completions::Column::LeaseUntil)
        .limit(BATCH)
        .all(db)
        .await?;
    let running = controls.running_of(Kind::Completion);
    let mut recovered = 0;
    for row in expired {
        // Still generating here (its renewal is late): not dead.
        if running.contains(&row.question_id) {
            continue;
        }
        if recover(db, row).await? {
            recovered += 1;
        }
    }
    Ok(recovered)
}

/// Claims `row` and stores its reply as interrupted; false when another replica claimed it
/// first, its lease was renewed, or its question is gone (deleted with its session).
async fn recover(db: &DatabaseConnection, row: active_completions::Model) -> ApiResult<bool> {
    let at = now();
    let txn = docchat_common::db::begin(db).await?;
    let claimed = active_completions::Entity::delete_many()
        .filter(active_completions::Column::QuestionId.eq(row.question_id.clone()))
        .filter(active_completions::Column::LeaseUntil.lt(at))
        .exec(&txn)
        .await?
        .rows_affected;
    if claimed == 0 {
        return Ok(false);
    }
    let question = messages::Entity::find_by_id(row.question_id.clone())
        .one(&txn)
        .await?;
    let answered = messages::Entity::find()
        .filter(messages::Column::ReplyTo.eq(row.question_id.clone()))
        .select_only()
        .column(messages::Column::Id)
        .into_tuple::<String>()
        .one(&txn)
        .await?
        .is_some();
    let Some(question) = question.filter(|_| !answered) else {
        txn.commit().await?;
        return Ok(false);
    };
    let text = row.progress.unwrap_or_default();
    let id = crate::completions::message_id();
    messages::Entity::insert(messages::ActiveModel {
        id: Set(id.clone()),
        session_id: Set(question.session_id.clone()),
        owner_id: Set(question.owner_id.clone()),
        username: Set(question.username.clone()),
        content: Set(text.clone()),
        reply_to: Set(Some(question.id.clone())),
        votes: Set(0),
        has_references: Set(false),
        total_references: Set(0),
        error: Set(Some(INTERRUPTED.to_owned())),
        // Its place is right after its question, not after what was asked since.
        created_at: Set(question.created_at + chrono::Duration::milliseconds(1)),
        // The lines its clients were sent (the row's progress ends at its last mark).
        stream_marks: Set(row.marks.clone()),
    })
    .exec_without_returning(&txn)
    .await?;
    // A row written before its generation's first progress (or by an older replica) has
    // no usage: nothing is known to book.
    match row.usage.as_deref().map(serde_json::from_str::<Spent>) {
        Some(Ok(spent)) => {
            let usage = spent.calls_with(&text);
            outbox::enqueue_all(&txn, &usage.events(&question.owner_id, &spent.model, &id)).await?;
            let elapsed = (at - row.started_at).num_milliseconds().max(0) as f64 / 1000.0;
            message_meta::Entity::insert(message_meta::ActiveModel {
                message_id: Set(id.clone()),
                info_type: Set("usage_stats".to_owned()),
                content: Set(usage.stats(&spent.model, elapsed, None)),
                ..Default::default()
            })
            .exec_without_returning(&txn)
            .await?;
        }
        Some(Err(e)) => {
            tracing::warn!(question = %question.id, error = %e, "a recovered reply's usage is unreadable; not booked");
        }
        None => {}
    }
    let mut touch = chat_sessions::Entity::update_many()
        .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at));
    if !text.is_empty() {
        touch = touch.col_expr(
            chat_sessions::Column::LatestMessageContent,
            Expr::value(text),
        );
    }
    touch
        .filter(chat_sessions::Column::Id.eq(question.session_id.clone()))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    tracing::info!(question = %question.id, "stored the interrupted reply of a dead replica");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use sea_orm::{ActiveModelTrait, Set};
    use sea_orm_migration::MigratorTrait;

    use super::*;

    async fn row(
        db: &DatabaseConnection,
        id: &str,
        status: &str,
        lease_ago: i64,
        expires_in: Option<i64>,
    ) {
        let at = now();
        background_responses::ActiveModel {
            id: Set(id.into()),
            owner_id: Set("u".into()),
            model: Set("m".into()),
            status: Set(status.into()),
            head: Set("{}".into()),
            progress: Set("so far".into()),
            marks: Set("2,6".into()),
            usage: Set(None),
            error: Set(None),
            created_at: Set(at),
            lease_until: Set(at - chrono::Duration::seconds(lease_ago)),
            expires_at: Set(expires_in.map(|s| at + chrono::Duration::seconds(s))),
        }
        .insert(db)
        .await
        .unwrap();
    }

    /// Background responses of a replica that stopped end failed (or cancelled, when a
    /// cancel came first) with their text kept, once their lease ran out and unless they
    /// run here; ended ones are deleted after their expiry.
    #[tokio::test]
    async fn orphaned_background_responses_fail_and_expired_ones_go() {
        let db = docchat_common::db::connect("sqlite::memory:")
            .await
            .unwrap();
        crate::migrations::Migrator::up(&db, None).await.unwrap();
        row(&db, "orphan", background::IN_PROGRESS, 5, None).await;
        row(&db, "cancelling", background::CANCELLED, 5, None).await;
        row(&db, "alive", background::IN_PROGRESS, -30, None).await;
        row(&db, "late-here", background::QUEUED, 5, None).await;
        row(&db, "expired", background::COMPLETED, 5, Some(-1)).await;
        row(&db, "kept", background::COMPLETED, 5, Some(60)).await;
        let controls = Controls::default();
        let (_state, _here) = controls.register("late-here", Kind::Background);

        let recovered = recover_background(&db, &controls, Duration::from_secs(600))
            .await
            .unwrap();
        assert_eq!(recovered, 2);
        let get = |id: &'static str| {
            let db = db.clone();
            async move {
                background_responses::Entity::find_by_id(id.to_owned())
                    .one(&db)
                    .await
                    .unwrap()
            }
        };
        let orphan = get("orphan").await.unwrap();
        assert_eq!(orphan.status, background::FAILED);
        assert!(orphan.error.unwrap().contains("interrupted"));
        assert_eq!(
            (orphan.progress.as_str(), orphan.marks.as_str()),
            ("so far", "2,6")
        );
        assert!(orphan.expires_at.is_some());
        let cancelling = get("cancelling").await.unwrap();
        assert_eq!(
            (cancelling.status.as_str(), cancelling.error),
            (background::CANCELLED, None)
        );
        assert!(cancelling.expires_at.is_some());
        for untouched in ["alive", "late-here"] {
            assert!(
                get(untouched).await.unwrap().expires_at.is_none(),
                "{untouched}"
            );
        }

        assert_eq!(sweep_background(&db).await.unwrap(), 1);
        assert!(get("expired").await.is_none());
        assert!(get("kept").await.is_some());
    }
}
