//! The LLM cost ledger. Every model call emits `usage.llm`; each event becomes one ledger row
//! (keyed by the event id, so a redelivery counts once) and moves the user's lifetime total
//! in the same transaction. The cost caps are checked against [`spend`].

use chrono::{DateTime, Duration, Utc};
use docchat_common::bus::EventHandler;
use docchat_common::bus::topics;
use docchat_common::error::ApiResult;
use docchat_common::time::{from_proto, now};
use docchat_proto::events::v1::{Envelope, LlmUsage};
use prost::Message;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect, Set,
};

use crate::entities::{llm_usage, llm_usage_totals};

pub const USAGE_GROUP: &str = "admin.llm-usage";

/// The rolling window of `max_llm_cost_per_user_per_24h`.
pub const WINDOW: Duration = Duration::hours(24);

/// What a user has spent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spend {
    pub last_24h: f64,
    pub total: f64,
    /// When the oldest call inside the window leaves it.
    pub window_reset_at: Option<DateTime<Utc>>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Books one call. Returns false when the event was already booked.
pub async fn record(
    db: &DatabaseConnection,
    event_id: &str,
    at: DateTime<Utc>,
    usage: &LlmUsage,
) -> ApiResult<bool> {
    // Costs arrive from the models file's prices; anything not finite or negative would
    // poison the sums, so it counts as zero.
    let cost = if usage.cost.is_finite() && usage.cost > 0.0 {
        usage.cost
    } else {
        0.0
    };
    let txn = docchat_common::db::begin(db).await?;
    let inserted = llm_usage::Entity::insert(llm_usage::ActiveModel {
        event_id: Set(event_id.to_owned()),
        user_id: Set(usage.user_id.clone()),
        model: Set(usage.model.chars().take(255).collect()),
        purpose: Set(usage.purpose.chars().take(64).collect()),
        message_id: Set(usage.message_id.chars().take(64).collect()),
        prompt_tokens: Set(tokens(usage.prompt_tokens)),
        completion_tokens: Set(tokens(usage.completion_tokens)),
        cost: Set(cost),
        created_at: Set(at),
    })
    .on_conflict(
        OnConflict::column(llm_usage::Column::EventId)
            .do_nothing()
            .to_owned(),
    )
    .exec_without_returning(&txn)
    .await?;
    if inserted == 0 {
        txn.rollback().await?;
        return Ok(false);
    }
    add_to_total(&txn, usage, cost).await?;
    txn.commit().await?;
    Ok(true)
}

async fn add_to_total(txn: &impl ConnectionTrait, usage: &LlmUsage, cost: f64) -> ApiResult<()> {
    use llm_usage_totals::Column as C;
    llm_usage_totals::Entity::insert(llm_usage_totals::ActiveModel {
        user_id: Set(usage.user_id.clone()),
        cost: Set(cost),
        prompt_tokens: Set(tokens(usage.prompt_tokens)),
        completion_tokens: Set(tokens(usage.completion_tokens)),
        updated_at: Set(now()),
    })
    .on_conflict(
        OnConflict::column(C::UserId)
            .value(
                C::Cost,
                Expr::col((llm_usage_totals::Entity, C::Cost)).add(cost),
            )
            .value(
                C::PromptTokens,
                Expr::col((llm_usage_totals::Entity, C::PromptTokens))
                    .add(tokens(usage.prompt_tokens)),
            )
            .value(
                C::CompletionTokens,
                Expr::col((llm_usage_totals::Entity, C::CompletionTokens))
                    .add(tokens(usage.completion_tokens)),
            )
            .value(C::UpdatedAt, now())
            .to_owned(),
    )
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// What `user_id` has spent, lifetime and over the last 24 hours as of `at`.
pub async fn spend(db: &DatabaseConnection, user_id: &str, at: DateTime<Utc>) -> ApiResult<Spend> {
    let total = llm_usage_totals::Entity::find_by_id(user_id.to_owned())
        .one(db)
        .await?;
    let Some(total) = total else {
        return Ok(Spend::default());
    };
    let since = at - WINDOW;
    let window: Option<(Option<f64>, Option<DateTime<Utc>>)> = llm_usage::Entity::find()
        .select_only()
        .column_as(llm_usage::Column::Cost.sum(), "cost")
        .column_as(llm_usage::Column::CreatedAt.min(), "oldest")
        .filter(llm_usage::Column::UserId.eq(user_id))
        .filter(llm_usage::Column::CreatedAt.gt(since))
        .filter(llm_usage::Column::Cost.gt(0.0))
        .into_tuple()
        .one(db)
        .await?;
    let (last_24h, oldest) = window.unwrap_or((None, None));
    Ok(Spend {
        last_24h: last_24h.unwrap_or(0.0),
        total: total.cost,
        window_reset_at: oldest.map(|t| t + WINDOW),
        prompt_tokens: u64::try_from(total.prompt_tokens).unwrap_or(0),
        completion_tokens: u64::try_from(total.completion_tokens).unwrap_or(0),
    })
}

/// Consumes `usage.llm` into the ledger.
pub struct UsageLedger {
    pub db: DatabaseConnection,
}

#[async_trait::async_trait]
impl EventHandler for UsageLedger {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if event.r#type != topics::USAGE_LLM {
            return Ok(());
        }
        let usage = LlmUsage::decode(event.payload.as_slice())?;
        if usage.user_id.is_empty() {
            tracing::warn!(event = %event.id, "usage.llm without a user; not booked");
            return Ok(());
        }
        let at = event.time.as_ref().map(from_proto).unwrap_or_else(now);
        record(&self.db, &event.id, at, &usage)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(())
    }
}
