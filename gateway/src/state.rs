//! What every handler shares: configuration, the service clients and the API-key cache.
//! Handlers reach services only through [`crate::auth::Api`], which binds these clients to
//! the request's caller.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::config::Config;
use docchat_common::ttl_cache::TtlCache;
use docchat_common::{Caller, Clients, JwtKeys};
use tokio_util::sync::CancellationToken;

pub struct AppState {
    pub config: Arc<Config>,
    /// Channels to every service; clients from here carry the caller they are bound to.
    pub clients: Clients,
    /// SHA-256 of an API key → the caller it resolved to.
    pub auth_cache: TtlCache<String, Arc<Caller>>,
    pub auth_ttl: Duration,
    /// The identity the gateway uses to resolve keys.
    pub gateway_identity: Caller,
    /// mcp_rate_limit and mcp_max_concurrent_jobs of this replica.
    pub mcp: crate::mcp_limits::Limiter,
    /// Cancelled on SIGTERM: from then on readiness says the gateway is going away.
    pub stopping: CancellationToken,
}

impl AppState {
    pub fn new(
        config: Arc<Config>,
        keys: Arc<JwtKeys>,
        stopping: CancellationToken,
    ) -> anyhow::Result<AppState> {
        Ok(AppState {
            clients: Clients::new(&config, keys)?,
            auth_ttl: Duration::from_millis(config.auth_cache_ttl_ms),
            auth_cache: TtlCache::new(100_000),
            gateway_identity: Caller::service("gateway"),
            mcp: crate::mcp_limits::Limiter::new(&config),
            stopping,
            config,
        })
    }
}
