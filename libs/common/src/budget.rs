//! The LLM cost caps of SPEC.md (max_llm_cost_per_user_per_24h, max_llm_cost_per_user,
//! max_llm_cost_per_guest; -1 disables), checked before every model call a user asks for.
//!
//! Spend comes from admin-service's ledger, which books `usage.llm` events; the caps come
//! from the user's resolved settings (cached for config_cache_ttl_seconds). When every cap
//! is disabled — the default — no spend is looked up, so the check costs nothing.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use docchat_proto::admin::v1::LlmSpendRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use tonic::transport::Channel;

use crate::JwtKeys;
use crate::auth::{Caller, authorized};
use crate::config::Service;
use crate::error::{ApiError, ErrorCode};
use crate::settings::Resolved;
use crate::time::from_proto;

/// The role that marks a guest account (case-insensitive).
pub const GUEST_ROLE: &str = "guest";

/// The caps in force for one user; `None` is no cap.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CostCaps {
    pub per_24h: Option<f64>,
    pub lifetime: Option<f64>,
    /// Applies to guests only, against their lifetime spend.
    pub guest: Option<f64>,
}

/// What a user has spent, as the ledger knows it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    pub last_24h: f64,
    pub total: f64,
    pub window_reset_at: Option<DateTime<Utc>>,
}

pub fn is_guest(caller: &Caller) -> bool {
    caller
        .roles
        .iter()
        .any(|r| r.eq_ignore_ascii_case(GUEST_ROLE))
}

impl CostCaps {
    pub fn resolve(settings: &Resolved, guest: bool) -> CostCaps {
        CostCaps {
            per_24h: settings.cost("max_llm_cost_per_user_per_24h"),
            lifetime: settings.cost("max_llm_cost_per_user"),
            guest: if guest {
                settings.cost("max_llm_cost_per_guest")
            } else {
                None
            },
        }
    }

    pub fn is_unlimited(&self) -> bool {
        self.per_24h.is_none() && self.lifetime.is_none() && self.guest.is_none()
    }

    /// Refuses (429) once a cap is reached: spend at or above the cap.
    pub fn check(&self, spend: &Spend, units: &str) -> Result<(), ApiError> {
        let refuse = |message: String| {
            crate::metrics::refused("llm_cost_cap");
            Err(ApiError::new(ErrorCode::TooManyRequests, message))
        };
        if let Some(cap) = self.lifetime
            && spend.total >= cap
        {
            return refuse(format!(
                "LLM cost cap reached: {} {units} spent of max_llm_cost_per_user {cap} {units}; an administrator must raise the cap",
                round(spend.total)
            ));
        }
        if let Some(cap) = self.guest
            && spend.total >= cap
        {
            return refuse(format!(
                "LLM cost cap reached: {} {units} spent of max_llm_cost_per_guest {cap} {units}; an administrator must raise the cap",
                round(spend.total)
            ));
        }
        if let Some(cap) = self.per_24h
            && spend.last_24h >= cap
        {
            let until = spend
                .window_reset_at
                .map(|t| {
                    format!(
                        "after {}",
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )
                })
                .unwrap_or_else(|| "later".to_owned());
            return refuse(format!(
                "LLM cost cap reached: {} {units} spent in the last 24 hours of max_llm_cost_per_user_per_24h {cap} {units}; try again {until}, when the oldest calls leave the window, or ask an administrator to raise the cap",
                round(spend.last_24h)
            ));
        }
        Ok(())
    }
}

fn round(cost: f64) -> f64 {
    (cost * 1e6).round() / 1e6
}

/// Checks a user's spend against their caps before a model call.
#[derive(Clone)]
pub struct CostGuard {
    admin: AdminServiceClient<Channel>,
    keys: Arc<JwtKeys>,
}

impl CostGuard {
    pub fn new(admin: Channel, keys: Arc<JwtKeys>) -> CostGuard {
        CostGuard {
            admin: AdminServiceClient::new(admin),
            keys,
        }
    }

    /// Ok when `caller`, whose settings are `settings`, may make another model call.
    pub async fn check(&self, caller: &Caller, settings: &Resolved) -> Result<(), ApiError> {
        let caps = CostCaps::resolve(settings, is_guest(caller));
        if caps.is_unlimited() {
            return Ok(());
        }
        let spend = self.spend(caller).await?;
        caps.check(&spend, settings.text("llm_cost_units"))
    }

    /// As [`CostGuard::check`], for a component acting on its own for `user_id` (an
    /// ingestion worker, the description writer): whether the guest cap applies comes
    /// from the ledger's answer, as the component knows no roles.
    pub async fn check_user(
        &self,
        component: &str,
        user_id: &str,
        settings: &Resolved,
    ) -> Result<(), ApiError> {
        if CostCaps::resolve(settings, true).is_unlimited() {
            return Ok(());
        }
        let (spend, guest) = self
            .ask(&Caller::service(component), user_id.to_owned())
            .await?;
        CostCaps::resolve(settings, guest).check(&spend, settings.text("llm_cost_units"))
    }

    pub async fn spend(&self, caller: &Caller) -> Result<Spend, ApiError> {
        Ok(self.ask(caller, String::new()).await?.0)
    }

    /// The spend of `user_id` (empty: the caller) and whether that user is a guest.
    async fn ask(&self, caller: &Caller, user_id: String) -> Result<(Spend, bool), ApiError> {
        let request = authorized(
            &self.keys,
            caller,
            Service::Admin,
            LlmSpendRequest { user_id },
        )?;
        let spend = self
            .admin
            .clone()
            .get_llm_spend(request)
            .await?
            .into_inner();
        Ok((
            Spend {
                last_24h: spend.cost_last_24h,
                total: spend.cost_total,
                window_reset_at: spend.window_reset_at.as_ref().map(from_proto),
            },
            spend.guest,
        ))
    }
}

/// What a call costs at `input_price` and `output_price` (per million prompt and
/// completion tokens).
pub fn call_cost(
    input_price: f64,
    output_price: f64,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> f64 {
    (prompt_tokens as f64 * input_price + completion_tokens as f64 * output_price) / 1_000_000.0
}

/// One model call of `user_id` as a `usage.llm` record (`message_id` empty).
pub fn llm_usage(
    user_id: &str,
    model: &str,
    prices: (f64, f64),
    purpose: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> docchat_proto::events::v1::LlmUsage {
    docchat_proto::events::v1::LlmUsage {
        user_id: user_id.to_owned(),
        model: model.to_owned(),
        prompt_tokens,
        completion_tokens,
        cost: call_cost(prices.0, prices.1, prompt_tokens, completion_tokens),
        purpose: purpose.to_owned(),
        message_id: String::new(),
        calls: 1,
    }
}

/// The `usage.llm` events booking `calls` (for the outbox), counted in the usage metrics
/// ([`crate::metrics::llm_usage`]) as they are made.
pub fn usage_events(
    calls: &[docchat_proto::events::v1::LlmUsage],
) -> Vec<docchat_proto::events::v1::Envelope> {
    calls
        .iter()
        .map(|usage| {
            crate::metrics::llm_usage(usage);
            crate::bus::envelope(crate::bus::topics::USAGE_LLM, &usage.user_id, usage)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Resolved {
        Resolved::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<HashMap<_, _>>(),
        )
    }

    #[test]
    fn defaults_disable_every_cap() {
        assert!(CostCaps::resolve(&settings(&[]), true).is_unlimited());
    }

    #[test]
    fn each_cap_refuses_at_its_limit() {
        let s = settings(&[
            ("max_llm_cost_per_user_per_24h", "1.5"),
            ("max_llm_cost_per_user", "10"),
            ("max_llm_cost_per_guest", "0.5"),
        ]);
        let user = CostCaps::resolve(&s, false);
        assert_eq!(user.guest, None);
        let spent = |last_24h, total| Spend {
            last_24h,
            total,
            window_reset_at: None,
        };
        assert!(user.check(&spent(1.49, 1.49), "USD").is_ok());
        let e = user.check(&spent(1.5, 1.5), "USD").unwrap_err();
        assert_eq!(e.code, ErrorCode::TooManyRequests);
        assert!(
            e.message.contains("max_llm_cost_per_user_per_24h"),
            "{}",
            e.message
        );
        let e = user.check(&spent(0.0, 10.0), "USD").unwrap_err();
        assert!(
            e.message.contains("max_llm_cost_per_user "),
            "{}",
            e.message
        );

        let guest = CostCaps::resolve(&s, true);
        let e = guest.check(&spent(0.6, 0.6), "USD").unwrap_err();
        assert!(
            e.message.contains("max_llm_cost_per_guest"),
            "{}",
            e.message
        );
        assert!(guest.check(&spent(0.4, 0.4), "USD").is_ok());
    }

    #[test]
    fn a_zero_cap_refuses_everything() {
        let caps = CostCaps::resolve(&settings(&[("max_llm_cost_per_user", "0")]), false);
        assert!(caps.check(&Spend::default(), "USD").is_err());
    }
}
