//! Service clients bound to a caller. Every call between docchat components goes through
//! one of these: a tonic interceptor ([`CallerAuth`]) mints the caller's internal JWT for
//! the client's own service (the audience cannot be mismatched with the client) and injects
//! the trace context, so a call site is only `clients.ingest(&caller).search(msg).await?`.

use std::sync::Arc;

use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::agent::v1::agent_service_client::AgentServiceClient;
use docchat_proto::agent::v1::custom_agent_service_client::CustomAgentServiceClient;
use docchat_proto::agent::v1::custom_tool_service_client::CustomToolServiceClient;
use docchat_proto::chat::v1::chat_service_client::ChatServiceClient;
use docchat_proto::chat::v1::memory_block_service_client::MemoryBlockServiceClient;
use docchat_proto::ingest::v1::ingest_service_client::IngestServiceClient;
use docchat_proto::scheduler::v1::scheduler_service_client::SchedulerServiceClient;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};

use crate::auth::{Caller, JwtKeys};
use crate::config::{Config, Service};
use crate::error::ApiError;
use crate::metrics::{GrpcMetrics, GrpcMetricsLayer};
use tower_layer::Layer as _;

/// Adds `authorization: Bearer <JWT for audience>` and the current trace context to every
/// request of the client it is installed on.
#[derive(Clone)]
pub struct CallerAuth {
    keys: Arc<JwtKeys>,
    caller: Arc<Caller>,
    audience: Service,
}

impl tonic::service::Interceptor for CallerAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let token = self.keys.mint(&self.caller, self.audience)?;
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|e| ApiError::internal("building authorization metadata", e))?;
        request.metadata_mut().insert("authorization", value);
        crate::telemetry::inject_grpc(request.metadata_mut());
        Ok(request)
    }
}

/// A generated client whose requests carry a caller's identity, counted and timed
/// ([`crate::metrics::GrpcMetricsLayer`]).
pub type Bound = InterceptedService<GrpcMetrics<Channel>, CallerAuth>;
pub type AdminClient = AdminServiceClient<Bound>;
pub type IngestClient = IngestServiceClient<Bound>;
pub type ChatClient = ChatServiceClient<Bound>;
pub type AgentClient = AgentServiceClient<Bound>;
pub type MemoryBlockClient = MemoryBlockServiceClient<Bound>;
pub type CustomToolClient = CustomToolServiceClient<Bound>;
pub type CustomAgentClient = CustomAgentServiceClient<Bound>;
pub type SchedulerClient = SchedulerServiceClient<Bound>;

/// Lazily connecting channels to every service and the keys to sign for them; cheap to
/// clone. Hand out clients bound to one caller with [`Clients::admin`], [`Clients::ingest`],
/// [`Clients::chat`] and [`Clients::agent`].
#[derive(Clone)]
pub struct Clients {
    keys: Arc<JwtKeys>,
    admin: Channel,
    ingest: Channel,
    chat: Channel,
    agent: Channel,
    scheduler: Channel,
    /// Largest message a client sends or accepts (gRPC's own default is 4 MiB).
    max_message_bytes: usize,
}

impl Clients {
    /// Channels to the URLs of `config` (nothing connects until the first call).
    pub fn new(config: &Config, keys: Arc<JwtKeys>) -> anyhow::Result<Clients> {
        let channel = |s| crate::grpc::channel(config.service_url(s));
        Ok(Clients {
            keys,
            admin: channel(Service::Admin)?,
            ingest: channel(Service::Ingest)?,
            chat: channel(Service::Chat)?,
            agent: channel(Service::Agent)?,
            scheduler: channel(Service::Scheduler)?,
            max_message_bytes: crate::grpc::max_message_bytes(config),
        })
    }

    /// The channel of `service` (health checks, readiness).
    pub fn channel(&self, service: Service) -> &Channel {
        match service {
            Service::Admin => &self.admin,
            Service::Ingest => &self.ingest,
            Service::Chat => &self.chat,
            Service::Agent => &self.agent,
            Service::Scheduler => &self.scheduler,
        }
    }

    /// The keys clients sign with.
    pub fn keys(&self) -> &Arc<JwtKeys> {
        &self.keys
    }

    fn bound(&self, caller: &Caller, audience: Service) -> Bound {
        InterceptedService::new(
            GrpcMetricsLayer::client().layer(self.channel(audience).clone()),
            CallerAuth {
                keys: self.keys.clone(),
                caller: Arc::new(caller.clone()),
                audience,
            },
        )
    }

    /// admin-service on behalf of `caller`.
    pub fn admin(&self, caller: &Caller) -> AdminClient {
        AdminServiceClient::new(self.bound(caller, Service::Admin))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// ingest-service on behalf of `caller`.
    pub fn ingest(&self, caller: &Caller) -> IngestClient {
        IngestServiceClient::new(self.bound(caller, Service::Ingest))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// chat-service on behalf of `caller`.
    pub fn chat(&self, caller: &Caller) -> ChatClient {
        ChatServiceClient::new(self.bound(caller, Service::Chat))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// chat-service's memory blocks on behalf of `caller`.
    pub fn memory_blocks(&self, caller: &Caller) -> MemoryBlockClient {
        MemoryBlockServiceClient::new(self.bound(caller, Service::Chat))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// agent-service on behalf of `caller`.
    pub fn agent(&self, caller: &Caller) -> AgentClient {
        AgentServiceClient::new(self.bound(caller, Service::Agent))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// agent-service's custom tools and MCP inspection on behalf of `caller`.
    pub fn custom_tools(&self, caller: &Caller) -> CustomToolClient {
        CustomToolServiceClient::new(self.bound(caller, Service::Agent))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// agent-service's custom agents, associations and stored keys on behalf of `caller`.
    pub fn custom_agents(&self, caller: &Caller) -> CustomAgentClient {
        CustomAgentServiceClient::new(self.bound(caller, Service::Agent))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }

    /// scheduler-service on behalf of `caller`.
    pub fn scheduler(&self, caller: &Caller) -> SchedulerClient {
        SchedulerServiceClient::new(self.bound(caller, Service::Scheduler))
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;
    use tonic::service::Interceptor;

    #[test]
    fn the_interceptor_signs_for_its_own_audience() {
        let keys = Arc::new(JwtKeys::new(
            &SecretString::from("0123456789abcdef0123456789abcdef"),
            60,
        ));
        let caller = crate::testing::user("alice", false);
        let mut auth = CallerAuth {
            keys: keys.clone(),
            caller: Arc::new(caller.clone()),
            audience: Service::Ingest,
        };
        let request = auth.call(Request::new(())).unwrap();
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap()
            .to_owned();
        assert_eq!(keys.verify(&token, Service::Ingest).unwrap(), caller);
        assert!(keys.verify(&token, Service::Chat).is_err());
    }
}
