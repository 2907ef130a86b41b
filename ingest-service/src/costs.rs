//! The model calls ingest-service makes for a user — transcription, document summaries and
//! questions, collection descriptions — count like any other (SPEC.md Limits, rule 1):
//! each is checked against its user's cost caps before it is made, and booked for that
//! user as a `usage.llm` event, written through the outbox in the transaction that stores
//! what the call produced.

use docchat_common::budget::{CostGuard, llm_usage, usage_events};
use docchat_common::error::ApiResult;
use docchat_common::settings::SettingsClient;
use docchat_inference::ModelEntry;
use docchat_proto::events::v1::{Envelope, LlmUsage};

/// How ingest-service names itself when it asks admin-service about a user.
const COMPONENT: &str = "ingest-models";

/// The cost caps of the users ingest-service calls models for.
#[derive(Clone)]
pub struct Costs {
    guard: CostGuard,
    settings: SettingsClient,
}

impl Costs {
    pub fn new(guard: CostGuard, settings: SettingsClient) -> Costs {
        Costs { guard, settings }
    }

    /// Ok when `user_id` may make another model call; else the refusal (429) that names
    /// the cap reached.
    pub async fn allow(&self, user_id: &str) -> ApiResult<()> {
        let settings = self.settings.resolve_user(COMPONENT, user_id).await?;
        self.guard.check_user(COMPONENT, user_id, &settings).await
    }
}

/// A model with its name and prices, so its calls can be booked.
pub struct Metered<M> {
    pub model: M,
    name: String,
    input_price: f64,
    output_price: f64,
}

impl<M> Metered<M> {
    pub fn new(model: M, entry: &ModelEntry) -> Metered<M> {
        Metered {
            model,
            name: entry.name.clone(),
            input_price: entry.input_price,
            output_price: entry.output_price,
        }
    }

    /// One call of this model for `user_id`.
    pub fn usage(
        &self,
        user_id: &str,
        purpose: &str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) -> LlmUsage {
        llm_usage(
            user_id,
            &self.name,
            (self.input_price, self.output_price),
            purpose,
            prompt_tokens,
            completion_tokens,
        )
    }
}

/// The `usage.llm` events booking `calls`.
pub fn events(calls: &[LlmUsage]) -> Vec<Envelope> {
    usage_events(calls)
}
