//! The one way to a model: [`ModelGate`] admits a model call (chat fairness → model
//! resolution → the caller's settings → cost caps), hands out fairness slots and books
//! calls made outside a reply's own transaction. Completions, the compatible API and
//! suggested questions all go through it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::budget::CostGuard;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::settings::{Resolved, SettingsClient};
use docchat_inference::{Catalog, ChatError, ChatModel, LocalOptions, ModelEntry, Registry};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::fairness::{Fairness, Permit, Priority};
use crate::rate::RateLimiter;
use crate::usage::UsageBook;

/// The chat models of one registry, each ready to call (or why it is not).
pub struct Models {
    registry: Arc<Registry>,
    by_name: HashMap<String, Result<Arc<ChatModel>, String>>,
    /// When this registry was built (Unix seconds).
    loaded_at: i64,
}

impl Models {
    /// The models of `registry`; a model `previous` already had with the same entry is kept
    /// as it is (a local model keeps its loaded weights and worker across refreshes).
    pub fn new(registry: Arc<Registry>, local: &LocalOptions, previous: Option<&Models>) -> Models {
        let by_name = registry
            .chat_models()
            .map(|entry| {
                let kept = previous.and_then(|p| {
                    let same = p.registry.chat_models().any(|e| e == entry);
                    p.by_name.get(&entry.name).filter(|_| same).cloned()
                });
                let model = kept.unwrap_or_else(|| {
                    ChatModel::from_entry(entry, local)
                        .map(Arc::new)
                        .map_err(|e| e.to_string())
                });
                if let Err(e) = &model {
                    tracing::warn!(model = %entry.name, error = %e, "chat model unusable");
                }
                (entry.name.clone(), model)
            })
            .collect();
        Models {
            registry,
            by_name,
            loaded_at: docchat_common::time::now().timestamp(),
        }
    }

    pub fn get(&self, name: &str) -> ApiResult<Arc<ChatModel>> {
        match self.by_name.get(name) {
            Some(Ok(model)) => Ok(model.clone()),
            Some(Err(why)) => Err(ApiError::new(
                ErrorCode::Unavailable,
                format!("model {name} is not usable: {why}"),
            )),
            None => Err(ApiError::bad_request(format!("model {name} not found"))),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// When the registry was built (Unix seconds).
    pub fn loaded_at(&self) -> i64 {
        self.loaded_at
    }
}

/// The models of the live [`Catalog`]: rebuilt when a refresh of the upstreams' listings
/// changes the registry.
pub struct LiveModels {
    catalog: Catalog,
    local: LocalOptions,
    current: RwLock<Arc<Models>>,
}

impl LiveModels {
    pub fn new(catalog: Catalog, local: LocalOptions) -> LiveModels {
        let current = Models::new(catalog.registry(), &local, None);
        LiveModels {
            catalog,
            local,
            current: RwLock::new(Arc::new(current)),
        }
    }

    /// The models as of the last refresh.
    pub fn current(&self) -> Arc<Models> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lists the upstreams again; rebuilds the models when the registry changed.
    pub async fn refresh(&self) {
        if self.catalog.refresh().await {
            let next = Models::new(self.catalog.registry(), &self.local, Some(&self.current()));
            *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        }
    }

    /// Whether every configured upstream answered its last listing.
    pub fn upstreams_answer(&self) -> bool {
        self.catalog.unreachable().is_empty()
    }

    /// Refreshes every `every` until `shutdown`, reporting whether the upstreams answer on
    /// `status` (readiness's degraded entry). Does nothing without upstreams.
    pub async fn run(
        self: Arc<Self>,
        every: Duration,
        status: watch::Sender<bool>,
        shutdown: CancellationToken,
    ) {
        if !self.catalog.has_upstreams() {
            return;
        }
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            self.refresh().await;
            status.send_replace(self.upstreams_answer());
        }
    }
}

/// A model call that may go ahead.
pub struct Admitted {
    pub entry: ModelEntry,
    pub model: Arc<ChatModel>,
    /// The caller's resolved settings (limits beyond the cost caps read them).
    pub settings: Resolved,
}

/// Admission and accounting of model calls; cheap to clone.
#[derive(Clone)]
pub struct ModelGate {
    models: Arc<LiveModels>,
    settings: SettingsClient,
    costs: CostGuard,
    /// Priority queues and the shared rate limit, when chat fairness is on.
    fairness: Option<(Fairness, RateLimiter)>,
    usage: UsageBook,
}

impl ModelGate {
    pub fn new(
        models: Arc<LiveModels>,
        settings: SettingsClient,
        costs: CostGuard,
        fairness: Option<(Fairness, RateLimiter)>,
        usage: UsageBook,
    ) -> ModelGate {
        ModelGate {
            models,
            settings,
            costs,
            fairness,
            usage,
        }
    }

    /// The whole sequence: [`count`](Self::count) then [`clear`](Self::clear).
    pub async fn admit(
        &self,
        caller: &Caller,
        requested: &str,
        unknown: impl FnOnce(&str) -> ApiError,
    ) -> ApiResult<(Option<Priority>, Admitted)> {
        let priority = self.count(caller).await?;
        let admitted = self.clear(caller, requested, unknown).await?;
        Ok((priority, admitted))
    }

    /// Counts a request of `caller` against chat fairness's rate limit, shared by every
    /// replica (429 above it); the priority its model call queues with, when fairness is on.
    pub async fn count(&self, caller: &Caller) -> ApiResult<Option<Priority>> {
        let Some((fairness, rate)) = &self.fairness else {
            return Ok(None);
        };
        rate.check(&caller.user_id).await?;
        Ok(Some(fairness.admit(&caller.user_id)))
    }

    /// Resolves `requested` (empty or `auto`: the default model; `unknown` words the error
    /// for a name the registry does not have), then checks the caller's cost caps.
    pub async fn clear(
        &self,
        caller: &Caller,
        requested: &str,
        unknown: impl FnOnce(&str) -> ApiError,
    ) -> ApiResult<Admitted> {
        let models = self.models.current();
        let entry = models.registry().resolve(requested).ok_or_else(|| {
            if requested.is_empty() || requested == "auto" {
                ApiError::new(ErrorCode::Unavailable, NO_CHAT_MODEL)
            } else {
                unknown(requested)
            }
        })?;
        let model = models.get(&entry.name)?;
        let settings = self.settings.resolve(caller).await?;
        self.costs.check(caller, &settings).await?;
        Ok(Admitted {
            entry: entry.clone(),
            model,
            settings,
        })
    }

    /// Waits for a fairness slot for a call admitted with `priority` (none without
    /// fairness). Dropping the future gives up the place in the queue; dropping the permit
    /// frees the slot.
    pub async fn slot(&self, priority: Option<Priority>) -> Option<Permit> {
        match (&self.fairness, priority) {
            (Some((fairness, _)), Some(priority)) => Some(fairness.acquire(priority).await),
            _ => None,
        }
    }

    /// Books a call made outside a reply (booked within the second, see [`UsageBook`]).
    pub fn book(
        &self,
        user_id: &str,
        entry: &ModelEntry,
        purpose: &str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) {
        self.usage
            .add(user_id, entry, purpose, prompt_tokens, completion_tokens);
    }

    pub fn usage(&self) -> &UsageBook {
        &self.usage
    }

    /// The chat models as of the last refresh, with their registry.
    pub fn models(&self) -> Arc<Models> {
        self.models.current()
    }
}

/// Why `auto` has no model: what a user who reads the error can do about it.
const NO_CHAT_MODEL: &str = "no chat model is configured: run scripts/fetch-models.sh --with-llm for the built-in one, set OPENAI_BASE_URL/OPENAI_API_KEY or OLLAMA_BASE_URL, or name models in DOCCHAT_MODELS_FILE";

/// A failed model call as the caller sees it, with its cause: the upstream's rate limit
/// (429), its timeout (504), an upstream that is down (503), or one that answered wrongly or
/// could not be reached (502). A local model or a missing key is this service's own
/// trouble (503); tools offered to a model without them, the caller's (400).
pub fn model_error(e: ChatError) -> ApiError {
    let code = match &e {
        ChatError::Upstream { status: 429, .. } => ErrorCode::TooManyRequests,
        ChatError::Upstream {
            status: 408 | 504, ..
        }
        | ChatError::Timeout(_) => ErrorCode::GatewayTimeout,
        ChatError::Upstream { status: 503, .. } => ErrorCode::Unavailable,
        ChatError::Upstream { .. } | ChatError::Unreachable(_) | ChatError::Malformed(_) => {
            ErrorCode::BadGateway
        }
        ChatError::MissingKey(_) | ChatError::Local(_) => ErrorCode::Unavailable,
        ChatError::ToolsUnsupported(_) => ErrorCode::BadRequest,
    };
    ApiError::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_errors_keep_their_cause() {
        let upstream = |status| ChatError::Upstream {
            status,
            message: String::new(),
        };
        let status = |e| model_error(e).code.http_status();
        assert_eq!(status(upstream(429)), 429);
        assert_eq!(status(upstream(504)), 504);
        assert_eq!(status(ChatError::Timeout("slow".into())), 504);
        assert_eq!(status(upstream(503)), 503);
        assert_eq!(status(upstream(500)), 502);
        assert_eq!(status(upstream(401)), 502);
        assert_eq!(status(ChatError::Unreachable("refused".into())), 502);
        assert_eq!(status(ChatError::Malformed("json".into())), 502);
        assert_eq!(status(ChatError::Local("oom".into())), 503);
    }
}
