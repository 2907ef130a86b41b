//! Bearer-key authentication as a typed extractor. A handler reaches a service only through
//! [`Api`], which exists only for a valid key and hands out clients already bound to its
//! caller (meilisearch's `GuardedData` carries its resource behind its policy the same way):
//! `api.ingest().get_collection(..)` is the whole call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use docchat_common::Caller;
use docchat_common::clients::{
    AdminClient, AgentClient, ChatClient, CustomAgentClient, CustomToolClient, IngestClient,
    MemoryBlockClient, SchedulerClient,
};
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::admin::v1::AuthenticateRequest;
use sha2::{Digest, Sha256};

use crate::error::{HttpError, TerseError};
use crate::state::AppState;

/// The authenticated caller of a request and the services, bound to that caller.
#[derive(Clone)]
pub struct Api {
    caller: Arc<Caller>,
    state: web::Data<AppState>,
}

impl Api {
    /// Who is calling.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// admin-service on behalf of the caller.
    pub fn admin(&self) -> AdminClient {
        self.state.clients.admin(&self.caller)
    }

    /// ingest-service on behalf of the caller.
    pub fn ingest(&self) -> IngestClient {
        self.state.clients.ingest(&self.caller)
    }

    /// chat-service on behalf of the caller.
    pub fn chat(&self) -> ChatClient {
        self.state.clients.chat(&self.caller)
    }

    /// chat-service's memory blocks on behalf of the caller.
    pub fn memory_blocks(&self) -> MemoryBlockClient {
        self.state.clients.memory_blocks(&self.caller)
    }

    /// agent-service on behalf of the caller.
    pub fn agent(&self) -> AgentClient {
        self.state.clients.agent(&self.caller)
    }

    /// agent-service's custom tools and MCP inspection on behalf of the caller.
    pub fn custom_tools(&self) -> CustomToolClient {
        self.state.clients.custom_tools(&self.caller)
    }

    /// agent-service's custom agents, associations and keys on behalf of the caller.
    pub fn custom_agents(&self) -> CustomAgentClient {
        self.state.clients.custom_agents(&self.caller)
    }

    /// scheduler-service on behalf of the caller.
    pub fn scheduler(&self) -> SchedulerClient {
        self.state.clients.scheduler(&self.caller)
    }

    /// The gateway's shared state (configuration, readiness channels).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// After a change of keys, roles or permissions: this gateway forgets every cached key
    /// at once (other replicas within their cache TTL).
    pub fn forget_cached_keys(&self) {
        self.state.auth_cache.clear();
    }
}

pub(crate) fn bearer(req: &HttpRequest) -> Result<String, HttpError> {
    let header = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            HttpError(ApiError::unauthenticated(
                "missing Authorization header: send Authorization: Bearer <API key>",
            ))
        })?;
    let value = header
        .to_str()
        .map_err(|_| HttpError(ApiError::unauthenticated("malformed Authorization header")))?;
    let (scheme, key) = value.split_once(' ').ok_or_else(|| {
        HttpError(ApiError::unauthenticated(
            "Authorization must be Bearer <API key>",
        ))
    })?;
    let key = key.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || key.is_empty() {
        return Err(HttpError(ApiError::unauthenticated(
            "Authorization must be Bearer <API key>",
        )));
    }
    Ok(key.to_owned())
}

/// Resolves a key through admin-service, with a short cache so a hot client costs one
/// lookup per TTL and a deleted key stops working within that TTL.
async fn resolve(state: &AppState, key: &str) -> Result<Arc<Caller>, HttpError> {
    let digest = hex::encode(Sha256::digest(key.as_bytes()));
    if let Some(hit) = state.auth_cache.get(&digest) {
        return Ok(hit);
    }
    let answer = state
        .clients
        .admin(&state.gateway_identity)
        .authenticate(AuthenticateRequest {
            api_key: key.to_owned(),
        })
        .await;
    let identity = match answer {
        Ok(r) => r.into_inner(),
        Err(status) => {
            let err = ApiError::from(status);
            return Err(HttpError(if err.code == ErrorCode::Unauthenticated {
                ApiError::unauthenticated("invalid API key")
            } else {
                err
            }));
        }
    };
    // A key that expires is trusted no longer than it lives: the cache entry ends with it
    // (a key expiring within the cache's TTL would otherwise work up to a TTL past it).
    let ttl = match identity.key_expires_at_ms {
        Some(at) => {
            let left = at.saturating_sub(docchat_common::time::now().timestamp_millis());
            state
                .auth_ttl
                .min(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
        }
        None => state.auth_ttl,
    };
    let caller = Arc::new(Caller::from(identity));
    if !ttl.is_zero() {
        state.auth_cache.insert(digest, caller.clone(), ttl);
    }
    Ok(caller)
}

impl FromRequest for Api {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<Api, HttpError>>>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        let key = bearer(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            let key = key?;
            let state =
                state.ok_or_else(|| HttpError(ApiError::internal("gateway state", "missing")))?;
            let caller = resolve(&state, &key).await?;
            Ok(Api { caller, state })
        })
    }
}

/// [`Api`] for SPEC.md's custom tool and custom agent endpoints: a missing or bad key
/// answers `{"code": 401, "message": "Unauthorized"}` (see [`TerseError`]); handlers return
/// [`crate::error::TerseResult`].
pub struct AgentsApi(pub Api);

impl std::ops::Deref for AgentsApi {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.0
    }
}

impl AgentsApi {
    /// The caller holds `permission`, else 401 `Unauthorized`.
    pub fn require(&self, permission: &str) -> Result<(), TerseError> {
        self.caller()
            .require_permission(permission)
            .map_err(|e| TerseError(HttpError(e)))
    }
}

impl FromRequest for AgentsApi {
    type Error = TerseError;
    type Future = Pin<Box<dyn Future<Output = Result<AgentsApi, TerseError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let api = Api::from_request(req, payload);
        Box::pin(async move { Ok(AgentsApi(api.await?)) })
    }
}
