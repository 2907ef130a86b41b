//! The tail every service's `serve()` shares: its gRPC API behind the internal-JWT
//! interceptor with docchat's message limits, gRPC health, serving until shutdown, then
//! draining the background tasks and closing the database.
//!
//! ```ignore
//! Host::new(&ctx)
//!     .api(AdminServiceServer::new(grpc::AdminGrpc { db: db.clone() }))
//!     .serve(listener, shutdown, background, db)
//!     .await
//! ```

use std::time::Duration;

use docchat_proto::admin::v1::admin_service_server::{AdminService, AdminServiceServer};
use docchat_proto::agent::v1::agent_service_server::{AgentService, AgentServiceServer};
use docchat_proto::agent::v1::custom_agent_service_server::{
    CustomAgentService, CustomAgentServiceServer,
};
use docchat_proto::agent::v1::custom_tool_service_server::{
    CustomToolService, CustomToolServiceServer,
};
use docchat_proto::chat::v1::chat_service_server::{ChatService, ChatServiceServer};
use docchat_proto::chat::v1::memory_block_service_server::{
    MemoryBlockService, MemoryBlockServiceServer,
};
use docchat_proto::ingest::v1::ingest_service_server::{IngestService, IngestServiceServer};
use docchat_proto::scheduler::v1::scheduler_service_server::{
    SchedulerService, SchedulerServiceServer,
};
use sea_orm::DatabaseConnection;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic_health::ServingStatus;

use crate::auth::AuthInterceptor;
use crate::config::Service;
use crate::grpc::{Background, ServiceContext};

/// A generated gRPC server a service hosts. Implemented for every docchat service server:
/// each is served for its own audience only, with [`max_message_bytes`] both ways.
///
/// [`max_message_bytes`]: crate::grpc::max_message_bytes
pub trait Api {
    /// The gRPC service name (`docchat.admin.v1.AdminService`), reported as serving.
    const NAME: &'static str;

    /// `routes` with this API added behind `AuthInterceptor` for its service, its message
    /// limits set to `max_message_bytes` in both directions.
    fn add_to(self, routes: Routes, ctx: &ServiceContext, max_message_bytes: usize) -> Routes;
}

macro_rules! api {
    ($server:ident, $handler:ident, $service:expr) => {
        impl<T: $handler> Api for $server<T> {
            const NAME: &'static str = <$server<T> as tonic::server::NamedService>::NAME;

            fn add_to(
                self,
                routes: Routes,
                ctx: &ServiceContext,
                max_message_bytes: usize,
            ) -> Routes {
                let limited = self
                    .max_decoding_message_size(max_message_bytes)
                    .max_encoding_message_size(max_message_bytes);
                routes.add_service(InterceptedService::new(
                    limited,
                    AuthInterceptor::new(ctx.keys.clone(), $service),
                ))
            }
        }
    };
}

api!(AdminServiceServer, AdminService, Service::Admin);
api!(IngestServiceServer, IngestService, Service::Ingest);
api!(ChatServiceServer, ChatService, Service::Chat);
api!(MemoryBlockServiceServer, MemoryBlockService, Service::Chat);
api!(AgentServiceServer, AgentService, Service::Agent);
api!(CustomToolServiceServer, CustomToolService, Service::Agent);
api!(CustomAgentServiceServer, CustomAgentService, Service::Agent);
api!(SchedulerServiceServer, SchedulerService, Service::Scheduler);

/// A service's gRPC server being assembled; see the module documentation.
pub struct Host {
    ctx: ServiceContext,
    routes: Routes,
    names: Vec<&'static str>,
    /// Further health names and whether they serve.
    statuses: Vec<(&'static str, bool)>,
    /// Health names that follow a part's state as it changes.
    live: Vec<(&'static str, watch::Receiver<bool>)>,
}

impl Host {
    /// gRPC health only; add the service's API with [`Host::api`].
    pub fn new(ctx: &ServiceContext) -> Host {
        Host {
            ctx: ctx.clone(),
            routes: Routes::default(),
            names: Vec::new(),
            statuses: Vec::new(),
            live: Vec::new(),
        }
    }

    /// Serves `api` (see [`Api`]).
    pub fn api<A: Api>(mut self, api: A) -> Host {
        let limit = crate::grpc::max_message_bytes(&self.ctx.config);
        self.routes = api.add_to(self.routes, &self.ctx, limit);
        self.names.push(A::NAME);
        self
    }

    /// Reports `name` in gRPC health as serving or not: a part of the service that can be
    /// unavailable while the service itself serves (agent-service's code sandbox).
    pub fn status(mut self, name: &'static str, serving: bool) -> Host {
        self.statuses.push((name, serving));
        self
    }

    /// Reports `name` in gRPC health as serving while `serving` holds true, following it
    /// as it changes (chat-service's model upstreams).
    pub fn live_status(mut self, name: &'static str, serving: watch::Receiver<bool>) -> Host {
        self.live.push((name, serving));
        self
    }

    /// Serves on `listener` until `shutdown`; then, requests drained, stops `background`
    /// (consumers stop, relays publish what is left) within the configured grace period,
    /// and closes `db`. A serving error is returned after the cleanup.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
        background: Background,
        db: DatabaseConnection,
    ) -> anyhow::Result<()> {
        let (health, health_service) = tonic_health::server::health_reporter();
        for name in &self.names {
            health
                .set_service_status(name, ServingStatus::Serving)
                .await;
        }
        for (name, serving) in &self.statuses {
            let status = if *serving {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            health.set_service_status(name, status).await;
        }
        for (name, mut serving) in self.live {
            let health = health.clone();
            let stop = background.token.clone();
            background.tracker.spawn(async move {
                loop {
                    let status = if *serving.borrow_and_update() {
                        ServingStatus::Serving
                    } else {
                        ServingStatus::NotServing
                    };
                    health.set_service_status(name, status).await;
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        changed = serving.changed() => if changed.is_err() { return },
                    }
                }
            });
        }
        let router = crate::grpc::server().add_routes(self.routes.add_service(health_service));
        let served = crate::grpc::serve_router(router, listener, shutdown).await;
        background
            .shutdown(Duration::from_secs(self.ctx.config.shutdown_grace_seconds))
            .await;
        let closed = db.close().await;
        served?;
        Ok(closed?)
    }
}
