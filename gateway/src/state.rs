//! What every handler shares: configuration, internal JWT keys, service clients and the
//! API-key cache.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::auth::authorized;
use docchat_common::config::{Config, Service};
use docchat_common::ttl_cache::TtlCache;
use docchat_common::{Caller, JwtKeys};
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::chat::v1::chat_service_client::ChatServiceClient;
use docchat_proto::ingest::v1::ingest_service_client::IngestServiceClient;
use tonic::transport::Channel;

use crate::error::HttpResult;

pub struct AppState {
    pub config: Arc<Config>,
    pub keys: Arc<JwtKeys>,
    pub admin: AdminServiceClient<Channel>,
    pub ingest: IngestServiceClient<Channel>,
    pub chat: ChatServiceClient<Channel>,
    /// Channels by service, for readiness.
    pub channels: Vec<(Service, Channel)>,
    /// SHA-256 of an API key → the caller it resolved to.
    pub auth_cache: TtlCache<String, Arc<Caller>>,
    pub auth_ttl: Duration,
    /// The identity the gateway uses to resolve keys.
    pub gateway_identity: Caller,
}

impl AppState {
    pub fn new(config: Arc<Config>, keys: Arc<JwtKeys>) -> anyhow::Result<AppState> {
        let mut channels = Vec::new();
        for service in Service::ALL {
            channels.push((
                service,
                docchat_common::grpc::channel(config.service_url(service))?,
            ));
        }
        let channel = |s: Service| {
            channels
                .iter()
                .find(|(svc, _)| *svc == s)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| anyhow::anyhow!("no channel for {}", s.name()))
        };
        Ok(AppState {
            admin: AdminServiceClient::new(channel(Service::Admin)?),
            ingest: IngestServiceClient::new(channel(Service::Ingest)?),
            chat: ChatServiceClient::new(channel(Service::Chat)?),
            auth_ttl: Duration::from_millis(config.auth_cache_ttl_ms),
            channels,
            config,
            keys,
            auth_cache: TtlCache::new(100_000),
            gateway_identity: Caller::service("gateway"),
        })
    }

    /// A gRPC request to `service` on behalf of `caller`.
    pub fn request<T>(
        &self,
        caller: &Caller,
        service: Service,
        message: T,
    ) -> HttpResult<tonic::Request<T>> {
        Ok(authorized(&self.keys, caller, service, message)?)
    }
}
