//! Every model call of a run is checked against the caller's cost caps before it is made
//! and booked as `usage.llm` after — the same CostGuard and settings chat-service and
//! ingest-service use (docchat_common::budget), booked through agent-service's outbox.

use docchat_common::Caller;
use docchat_common::budget::{CostGuard, llm_usage, usage_events};
use docchat_common::error::ApiError;
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::settings::SettingsClient;
use docchat_proto::events::v1::LlmUsage;
use sea_orm::DatabaseConnection;

#[async_trait::async_trait]
pub trait Budget: Send + Sync {
    /// Ok when `caller` may make another model call; else the refusal naming the cap.
    async fn check(&self, caller: &Caller) -> Result<(), ApiError>;
    /// Books one call.
    async fn book(&self, usage: LlmUsage);
}

/// The production budget.
pub struct CostBudget {
    pub settings: SettingsClient,
    pub guard: CostGuard,
    pub db: DatabaseConnection,
    pub relay: OutboxRelay,
}

#[async_trait::async_trait]
impl Budget for CostBudget {
    async fn check(&self, caller: &Caller) -> Result<(), ApiError> {
        let settings = self.settings.resolve(caller).await?;
        self.guard.check(caller, &settings).await
    }

    async fn book(&self, usage: LlmUsage) {
        match outbox::enqueue_all(&self.db, &usage_events(std::slice::from_ref(&usage))).await {
            Ok(()) => self.relay.notify(),
            Err(e) => {
                tracing::warn!(error = %e, user = %usage.user_id, "agent model usage not booked")
            }
        }
    }
}

/// A call of `model` (prices per million tokens) as a usage record.
pub fn usage_of(
    caller: &Caller,
    entry: &docchat_inference::ModelEntry,
    purpose: &str,
    message_id: &str,
    tokens: (u64, u64),
) -> LlmUsage {
    let mut u = llm_usage(
        &caller.user_id,
        &entry.name,
        (entry.input_price, entry.output_price),
        purpose,
        tokens.0,
        tokens.1,
    );
    u.message_id = message_id.to_owned();
    u
}
