//! Runtime settings of SPEC.md: definitions with defaults, ranges and types (admin-service
//! validates against them), and the cached client other services resolve them with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use docchat_proto::admin::v1::ResolveSettingsRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use tonic::transport::Channel;

use crate::auth::{Caller, JwtKeys, authorized};
use crate::config::Service;
use crate::error::ApiError;
use crate::ttl_cache::TtlCache;

/// The type and allowed values of a setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// An integer in `min..=max`; `-1` additionally allowed when `unlimited` is set.
    Int { min: i64, max: i64, unlimited: bool },
    /// A non-negative amount, or `-1` to disable.
    Cost,
    /// Free text (non-empty).
    Text,
}

/// One runtime setting.
#[derive(Debug, Clone, Copy)]
pub struct Definition {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    /// Whether role and user overrides are allowed.
    pub overridable: bool,
    pub description: &'static str,
}

const MB: i64 = 1024 * 1024;
const GB: i64 = 1024 * MB;

/// SPEC.md's runtime table. Defaults the spec leaves open are unlimited (-1), except the
/// collection size (the top of its range) and the currency (USD).
pub const DEFINITIONS: &[Definition] = &[
    Definition {
        name: "collection_limit",
        default: "-1",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
            unlimited: true,
        },
        overridable: false,
        description: "system-wide maximum number of collections; -1 unlimited",
    },
    Definition {
        name: "collection_limit_per_user",
        default: "-1",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
            unlimited: true,
        },
        overridable: true,
        description: "maximum collections per user; -1 unlimited",
    },
    Definition {
        name: "document_limit_per_user",
        default: "-1",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
            unlimited: true,
        },
        overridable: true,
        description: "maximum documents per user; -1 unlimited",
    },
    Definition {
        name: "agents_document_limit_per_user",
        default: "-1",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
            unlimited: true,
        },
        overridable: true,
        description: "maximum documents created by agents per user; -1 unlimited",
    },
    Definition {
        name: "default_collection_size_limit",
        default: "10737418240",
        kind: Kind::Int {
            min: MB,
            max: 10 * GB,
            unlimited: false,
        },
        overridable: false,
        description: "default maximum storage per collection in bytes (1 MB to 10 GB)",
    },
    Definition {
        name: "max_llm_cost_per_user_per_24h",
        default: "-1",
        kind: Kind::Cost,
        overridable: true,
        description: "rolling 24-hour LLM cost cap per user; -1 disables",
    },
    Definition {
        name: "max_llm_cost_per_user",
        default: "-1",
        kind: Kind::Cost,
        overridable: true,
        description: "lifetime LLM cost cap per user; -1 disables",
    },
    Definition {
        name: "max_llm_cost_per_guest",
        default: "-1",
        kind: Kind::Cost,
        overridable: true,
        description: "LLM cost cap for guests; -1 disables",
    },
    Definition {
        name: "llm_cost_units",
        default: "USD",
        kind: Kind::Text,
        overridable: false,
        description: "currency unit of cost tracking",
    },
    Definition {
        name: "chat_max_concurrent_per_user",
        default: "100000",
        kind: Kind::Int {
            min: 1,
            max: 1_000_000,
            unlimited: true,
        },
        overridable: true,
        description: "simultaneous active chat sessions per user; -1 unlimited",
    },
    Definition {
        name: "crawl_max_concurrent_per_user",
        default: "25",
        kind: Kind::Int {
            min: 1,
            max: 10_000,
            unlimited: true,
        },
        overridable: true,
        description: "concurrent ingestion jobs per user; -1 unlimited",
    },
    Definition {
        name: crate::limits::MEMORY_BLOCK_CONTENT_SETTING,
        default: "1048576",
        kind: Kind::Int {
            min: 1024,
            max: 64 * MB,
            unlimited: false,
        },
        overridable: false,
        description: "ceiling on a memory block's content in bytes, also for max_content_length 0 (unlimited); 1 KB to 64 MB",
    },
    Definition {
        name: "config_cache_ttl_seconds",
        default: "60",
        kind: Kind::Int {
            min: 0,
            max: 3600,
            unlimited: false,
        },
        overridable: false,
        description: "how long resolved settings may be cached",
    },
];

/// The definition of `name`, if it is a runtime setting.
pub fn definition(name: &str) -> Option<&'static Definition> {
    DEFINITIONS.iter().find(|d| d.name == name)
}

impl Definition {
    /// The type name shown in configuration listings.
    pub fn value_type(&self) -> &'static str {
        match self.kind {
            Kind::Int { .. } => "int",
            Kind::Cost => "float",
            Kind::Text => "string",
        }
    }

    /// Checks a value and returns its canonical text; a bad value is a 400 that names the
    /// allowed range.
    pub fn validate(&self, value: &str) -> Result<String, ApiError> {
        let value = value.trim();
        match self.kind {
            Kind::Int {
                min,
                max,
                unlimited,
            } => {
                let n: i64 = value.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "{} must be an integer, got {value:?}",
                        self.name
                    ))
                })?;
                if (unlimited && n == -1) || (min..=max).contains(&n) {
                    Ok(n.to_string())
                } else {
                    let range = if max == i64::MAX {
                        format!("at least {min}")
                    } else {
                        format!("between {min} and {max}")
                    };
                    let extra = if unlimited {
                        " (or -1 for unlimited)"
                    } else {
                        ""
                    };
                    Err(ApiError::bad_request(format!(
                        "{} must be {range}{extra}, got {n}",
                        self.name
                    )))
                }
            }
            Kind::Cost => {
                let x: f64 = value.parse().map_err(|_| {
                    ApiError::bad_request(format!("{} must be a number, got {value:?}", self.name))
                })?;
                if x == -1.0 || (x.is_finite() && x >= 0.0) {
                    Ok(x.to_string())
                } else {
                    Err(ApiError::bad_request(format!(
                        "{} must be a non-negative amount or -1 to disable, got {value}",
                        self.name
                    )))
                }
            }
            Kind::Text => {
                if value.is_empty() || value.len() > 64 {
                    Err(ApiError::bad_request(format!(
                        "{} must be 1 to 64 characters",
                        self.name
                    )))
                } else {
                    Ok(value.to_owned())
                }
            }
        }
    }
}

/// Settings resolved for one user.
#[derive(Debug, Clone, Default)]
pub struct Resolved(HashMap<String, String>);

impl Resolved {
    pub fn new(values: HashMap<String, String>) -> Self {
        Resolved(values)
    }

    fn raw(&self, name: &str) -> &str {
        self.0
            .get(name)
            .map(String::as_str)
            .or_else(|| definition(name).map(|d| d.default))
            .unwrap_or("")
    }

    /// An integer setting; `None` means unlimited (-1).
    pub fn limit(&self, name: &str) -> Option<i64> {
        match self.raw(name).parse::<i64>() {
            Ok(-1) => None,
            Ok(n) => Some(n),
            Err(_) => None,
        }
    }

    /// A cost setting; `None` means no cap (any negative value, the documented -1).
    pub fn cost(&self, name: &str) -> Option<f64> {
        self.raw(name)
            .parse::<f64>()
            .ok()
            .filter(|c| c.is_finite() && *c >= 0.0)
    }

    pub fn text(&self, name: &str) -> &str {
        self.raw(name)
    }
}

/// Resolves a user's settings through admin-service, cached for the TTL it announces
/// (config_cache_ttl_seconds).
#[derive(Clone)]
pub struct SettingsClient {
    client: AdminServiceClient<Channel>,
    keys: Arc<JwtKeys>,
    cache: Arc<TtlCache<String, Resolved>>,
}

impl SettingsClient {
    pub fn new(channel: Channel, keys: Arc<JwtKeys>) -> Self {
        SettingsClient {
            client: AdminServiceClient::new(channel),
            keys,
            cache: Arc::new(TtlCache::new(10_000)),
        }
    }

    /// The settings in force for `caller`.
    pub async fn resolve(&self, caller: &Caller) -> Result<Resolved, ApiError> {
        self.resolve_as(caller, &caller.user_id, String::new())
            .await
    }

    /// The settings in force for `user_id`, asked by a component acting on its own (a
    /// worker running that user's job).
    pub async fn resolve_user(&self, component: &str, user_id: &str) -> Result<Resolved, ApiError> {
        self.resolve_as(&Caller::service(component), user_id, user_id.to_owned())
            .await
    }

    async fn resolve_as(
        &self,
        caller: &Caller,
        user_id: &str,
        for_user: String,
    ) -> Result<Resolved, ApiError> {
        if let Some(hit) = self.cache.get(&user_id.to_owned()) {
            return Ok(hit);
        }
        let request = authorized(
            &self.keys,
            caller,
            Service::Admin,
            ResolveSettingsRequest { user_id: for_user },
        )?;
        let response = self
            .client
            .clone()
            .resolve_settings(request)
            .await?
            .into_inner();
        let resolved = Resolved::new(response.values);
        if response.cache_ttl_seconds > 0 {
            self.cache.insert(
                user_id.to_owned(),
                resolved.clone(),
                Duration::from_secs(u64::from(response.cache_ttl_seconds)),
            );
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        for d in DEFINITIONS {
            assert_eq!(d.validate(d.default).unwrap(), d.default, "{}", d.name);
        }
    }

    #[test]
    fn ranges_are_enforced() {
        let ttl = definition("config_cache_ttl_seconds").unwrap();
        assert!(ttl.validate("3600").is_ok());
        assert!(ttl.validate("3601").is_err());
        assert!(ttl.validate("-1").is_err());
        let chat = definition("chat_max_concurrent_per_user").unwrap();
        assert!(chat.validate("-1").is_ok());
        assert!(chat.validate("1000001").is_err());
        assert!(chat.validate("abc").is_err());
        let size = definition("default_collection_size_limit").unwrap();
        assert!(size.validate("1048575").is_err());
        assert!(size.validate("1048576").is_ok());
        let cost = definition("max_llm_cost_per_user").unwrap();
        assert_eq!(cost.validate("2.5").unwrap(), "2.5");
        assert!(cost.validate("-2").is_err());
        assert!(cost.validate("NaN").is_err());
        let err = definition("crawl_max_concurrent_per_user")
            .unwrap()
            .validate("0")
            .unwrap_err();
        assert_eq!(err.code.http_status(), 400);
        assert!(err.message.contains("between 1 and 10000"));
    }

    #[test]
    fn resolved_reads_defaults_and_unlimited() {
        let r = Resolved::new(HashMap::from([(
            "collection_limit_per_user".into(),
            "3".into(),
        )]));
        assert_eq!(r.limit("collection_limit_per_user"), Some(3));
        assert_eq!(r.limit("collection_limit"), None);
        assert_eq!(r.limit("crawl_max_concurrent_per_user"), Some(25));
        assert_eq!(r.text("llm_cost_units"), "USD");
        assert_eq!(
            r.limit(crate::limits::MEMORY_BLOCK_CONTENT_SETTING),
            Some(crate::limits::MEMORY_BLOCK_CONTENT_BYTES)
        );
    }
}
