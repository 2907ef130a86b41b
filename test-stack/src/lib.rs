//! One builder for the multi-service test stack: admin-service, ingest-service, chat-service
//! replicas and (feature `gateway`) the rest of docchat behind its REST gateway, on a chosen
//! [`Backend`], with a models file, scripted upstreams and any configuration (limits,
//! workers …). Each service runs as it is deployed: its own `serve()` on a loopback gRPC port;
//! on RabbitMQ each has its own bus connection, as separate processes do, while on the
//! in-process bus they share the one bus of the process.
//!
//! Only ever a dev-dependency: it depends on the service crates, whose tests use it.
//!
//! ```ignore
//! let upstream = ScriptedHttp::start_streaming(..).await;
//! let stack = Stack::builder(&backend)
//!     .ingest()
//!     .chat_replicas(2)
//!     .scripted_model(&upstream.base_url)
//!     .configure(|c| c.chat_rate_limit_per_minute = 3)
//!     .start()
//!     .await;
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a stack that cannot start fails the test that wanted it"
)]

mod chat;
mod ingest;
#[cfg(feature = "gateway")]
mod rest;

use std::path::Path;
use std::sync::Arc;

use docchat_common::auth::authorized;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::ServiceContext;
use docchat_common::testing::{Backend, Spawned, bind, context};
use docchat_common::{Caller, JwtKeys};

pub use chat::{Line, deltas, lines, lines_to_end, rest};
#[cfg(feature = "gateway")]
pub use rest::read;

/// The bootstrap administrator's API key of a stack with a gateway.
pub const ADMIN_KEY: &str = "sk-test-admin-key-0123456789";

/// What to start; see [`Stack::builder`].
pub struct StackBuilder {
    backend: Backend,
    config: Config,
    dir: tempfile::TempDir,
    ingest: bool,
    chat_replicas: usize,
    #[cfg(feature = "agent")]
    agent: bool,
    #[cfg(feature = "gateway")]
    agent_and_scheduler: bool,
    #[cfg(feature = "gateway")]
    gateway: bool,
}

impl StackBuilder {
    /// Adds ingest-service.
    pub fn ingest(mut self) -> Self {
        self.ingest = true;
        self
    }

    /// Runs `n` chat-service replicas on the stack's database and bus (the first is the one
    /// `chat_url` names).
    pub fn chat_replicas(mut self, n: usize) -> Self {
        self.chat_replicas = n;
        self
    }

    /// Adds agent-service (chat-service's agent completions call it).
    #[cfg(feature = "agent")]
    pub fn agent(mut self) -> Self {
        self.agent = true;
        self
    }

    /// A models file with this text.
    pub fn models(mut self, toml: &str) -> Self {
        let path = self.dir.path().join("models.toml");
        std::fs::write(&path, toml).unwrap();
        self.config.models_file = Some(path);
        self
    }

    /// A models file naming one OpenAI-compatible chat model, `scripted` (the default, 8192
    /// tokens of context, priced 1 and 2 per million tokens), served at `base_url` (a
    /// [`ScriptedHttp`](docchat_common::testing::ScriptedHttp)'s).
    pub fn scripted_model(self, base_url: &str) -> Self {
        self.models(&scripted_model(base_url))
    }

    /// The models file of [`tool_models`]: `scripted` calls tools, `plain` does not.
    pub fn tool_models(self, base_url: &str) -> Self {
        self.models(&tool_models(base_url))
    }

    /// Changes the configuration (limits, workers, fairness …); applied now, in order, so a
    /// later call overrides an earlier one and the builder's own choices.
    pub fn configure(mut self, tweak: impl FnOnce(&mut Config)) -> Self {
        tweak(&mut self.config);
        self
    }

    /// The REST gateway in front of whatever runs, with the bootstrap administrator key
    /// [`ADMIN_KEY`] and a short authentication cache. Without [`everything`](Self::everything)
    /// the URLs of services that do not run stay as configured (nothing may answer there).
    #[cfg(feature = "gateway")]
    pub fn gateway(mut self) -> Self {
        self.gateway = true;
        self.config.bootstrap_admin_key = Some(ADMIN_KEY.to_owned().into());
        self.config.auth_cache_ttl_ms = 500;
        self
    }

    /// All five services (one chat replica unless asked for more) and the gateway: docchat
    /// as a client sees it.
    #[cfg(feature = "gateway")]
    pub fn everything(mut self) -> Self {
        self.ingest = true;
        self.chat_replicas = self.chat_replicas.max(1);
        self.agent_and_scheduler = true;
        self.gateway()
    }

    /// Starts admin-service, then what was asked for, each once healthy; with a gateway,
    /// returns once it is live (and ready, when every service runs).
    pub async fn start(self) -> Stack {
        let StackBuilder {
            backend,
            mut config,
            dir,
            ingest,
            chat_replicas,
            #[cfg(feature = "agent")]
            agent,
            #[cfg(feature = "gateway")]
            agent_and_scheduler,
            #[cfg(feature = "gateway")]
            gateway,
        } = self;
        let mut wanted = vec![Service::Admin];
        if ingest {
            wanted.push(Service::Ingest);
        }
        #[cfg(feature = "gateway")]
        if agent_and_scheduler {
            wanted.extend([Service::Agent, Service::Scheduler]);
        }
        #[cfg(feature = "agent")]
        if agent && !wanted.contains(&Service::Agent) {
            wanted.push(Service::Agent);
        }
        let mut listeners = Vec::new();
        for service in wanted {
            let (listener, url) = bind().await;
            config.set_service_url(service, url);
            listeners.push((service, listener));
        }
        let mut chat_listeners = Vec::new();
        for i in 0..chat_replicas {
            let (listener, url) = bind().await;
            if i == 0 {
                config.chat_url = url.clone();
            }
            chat_listeners.push((listener, url));
        }
        let ctx = context(config.clone());
        let mut stack = Stack {
            backend: backend.name,
            keys: ctx.keys.clone(),
            ctx,
            config,
            admin: None,
            ingest: None,
            chats: Vec::new(),
            #[cfg(feature = "agent")]
            others: Vec::new(),
            #[cfg(feature = "gateway")]
            gateway: None,
            _dir: dir,
        };
        for (service, listener) in listeners {
            let url = stack.config.service_url(service).to_owned();
            let spawned = stack
                .serve(service, stack.service_context(), listener, url)
                .await;
            match service {
                Service::Admin => stack.admin = Some(spawned),
                Service::Ingest => stack.ingest = Some(spawned),
                #[cfg(feature = "agent")]
                Service::Agent | Service::Scheduler => stack.others.push(spawned),
                other => unreachable!("{other:?} is started apart"),
            }
        }
        for (listener, url) in chat_listeners {
            let spawned = stack
                .serve(Service::Chat, stack.service_context(), listener, url)
                .await;
            stack.chats.push(spawned);
        }
        #[cfg(feature = "gateway")]
        if gateway {
            stack.gateway = Some(rest::Gateway::start(&stack.ctx, agent_and_scheduler).await);
        }
        stack
    }
}

/// The models file of [`StackBuilder::scripted_model`].
pub fn scripted_model(base_url: &str) -> String {
    format!(
        "[[models]]\nname = \"scripted\"\nprovider = \"openai\"\nbase_url = \"{base_url}/v1\"\ncontext_length = 8192\ninput_price = 1.0\noutput_price = 2.0\ndefault = true\n"
    )
}

/// A models file for agent tests: two OpenAI-compatible models served at `base_url`,
/// `scripted` (marked `tools = true`, the default, 8192 tokens of context, priced 1000 per
/// million tokens each way so one call's cost is easy to reckon) and `plain` (no tools).
pub fn tool_models(base_url: &str) -> String {
    format!(
        "[[models]]\nname = \"scripted\"\nbase_url = \"{base_url}/v1\"\ntools = true\ndefault = true\ncontext_length = 8192\ninput_price = 1000.0\noutput_price = 1000.0\n\n\
         [[models]]\nname = \"plain\"\nbase_url = \"{base_url}/v1\"\ncontext_length = 8192\n"
    )
}

/// Running services of one test, on one backend, with one temporary data dir. Dropped, its
/// services end with the test's runtime; [`stop`](Self::stop) stops them gracefully and
/// fails the test if one does not stop cleanly.
pub struct Stack {
    /// The backend's name, for assertion messages.
    pub backend: &'static str,
    /// The configuration every service got (service URLs filled in).
    pub config: Config,
    /// A context like the services' (its bus is theirs on the in-process bus).
    pub ctx: ServiceContext,
    /// The keys that sign internal tokens (see [`req`](Self::req)).
    pub keys: Arc<JwtKeys>,
    /// Always runs (every service reads limits and settings there). An `Option` only so
    /// that a test can stop it apart (`take()`).
    pub admin: Option<Spawned>,
    pub ingest: Option<Spawned>,
    /// The chat-service replicas of [`StackBuilder::chat_replicas`].
    pub chats: Vec<Spawned>,
    /// agent- and scheduler-service, when they run.
    #[cfg(feature = "agent")]
    others: Vec<Spawned>,
    #[cfg(feature = "gateway")]
    gateway: Option<rest::Gateway>,
    _dir: tempfile::TempDir,
}

impl Stack {
    /// A stack on `backend`, with a data dir of its own, databases and bus namespace:
    /// admin-service alone until more is asked for.
    pub fn builder(backend: &Backend) -> StackBuilder {
        let dir = tempfile::tempdir().unwrap();
        StackBuilder {
            config: backend.config(dir.path()),
            backend: backend.clone(),
            dir,
            ingest: false,
            chat_replicas: 0,
            #[cfg(feature = "agent")]
            agent: false,
            #[cfg(feature = "gateway")]
            agent_and_scheduler: false,
            #[cfg(feature = "gateway")]
            gateway: false,
        }
    }

    /// docchat behind its gateway ([`StackBuilder::everything`]).
    #[cfg(feature = "gateway")]
    pub async fn docchat(backend: &Backend) -> Stack {
        Stack::builder(backend).everything().start().await
    }

    /// As [`docchat`](Self::docchat) with a changed configuration.
    #[cfg(feature = "gateway")]
    pub async fn docchat_with(backend: &Backend, tweak: impl FnOnce(&mut Config)) -> Stack {
        Stack::builder(backend)
            .everything()
            .configure(tweak)
            .start()
            .await
    }

    /// The data dir of the stack's services.
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// A request as `who` for `service`, with the internal token the gateway would mint.
    pub fn req<T>(&self, service: Service, who: &Caller, msg: T) -> tonic::Request<T> {
        authorized(&self.keys, who, service, msg).unwrap()
    }

    /// admin-service.
    pub fn admin(&self) -> &Spawned {
        self.admin.as_ref().expect("admin-service was stopped")
    }

    /// Starts another replica of `service` on the stack's database and bus, with the stack's
    /// configuration changed by `tweak`; the caller owns (and stops) it.
    pub async fn replica(&self, service: Service, tweak: impl FnOnce(&mut Config)) -> Spawned {
        let (listener, url) = bind().await;
        let ctx = self.replica_context(service, &url, tweak);
        self.serve(service, ctx, listener, url).await
    }

    /// Another agent-service replica whose runs have `catalog` (tests add tools, e.g. MCP
    /// ones) and may reach the hosts `allow` on private addresses.
    #[cfg(feature = "agent")]
    pub async fn agent_with(
        &self,
        catalog: docchat_agent_service::tools::Catalog,
        allow: Vec<String>,
    ) -> Spawned {
        let (listener, url) = bind().await;
        let ctx = self.replica_context(Service::Agent, &url, |_| {});
        Spawned::start(ctx, listener, url, move |c, l, s| {
            docchat_agent_service::serve_with(c, l, s, catalog, allow)
        })
        .await
        .unwrap_or_else(|e| panic!("agent-service did not start on {}: {e:#}", self.backend))
    }

    /// Like [`replica`](Self::replica), but the start's result, for tests of starts that fail.
    pub async fn try_replica(
        &self,
        service: Service,
        tweak: impl FnOnce(&mut Config),
    ) -> anyhow::Result<Spawned> {
        let (listener, url) = bind().await;
        let ctx = self.replica_context(service, &url, tweak);
        start(service, ctx, listener, url).await
    }

    /// Opens `service`'s database beside it.
    pub async fn database(&self, service: Service) -> sea_orm::DatabaseConnection {
        docchat_common::db::connect(&self.ctx.database_url(service))
            .await
            .unwrap()
    }

    /// The rows of `table` in `service`'s database.
    pub async fn count_rows(&self, service: Service, table: &str) -> i64 {
        use sea_orm::{ConnectionTrait, Statement};
        let db = self.database(service).await;
        let row = db
            .query_one(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT COUNT(*) FROM {table}"),
            ))
            .await
            .unwrap()
            .unwrap();
        db.close().await.unwrap();
        row.try_get_by_index::<i64>(0).unwrap()
    }

    fn replica_context(
        &self,
        service: Service,
        url: &str,
        tweak: impl FnOnce(&mut Config),
    ) -> ServiceContext {
        let mut config = self.config.clone();
        config.set_service_url(service, url.to_owned());
        tweak(&mut config);
        ServiceContext {
            config: Arc::new(config),
            ..self.service_context()
        }
    }

    /// A context for one more service: its own bus connection on RabbitMQ (as a process of
    /// its own has), the process's bus otherwise.
    fn service_context(&self) -> ServiceContext {
        if self.config.amqp_url.is_some() {
            ServiceContext {
                bus: docchat_common::bus::from_config(&self.ctx.config),
                ..self.ctx.clone()
            }
        } else {
            self.ctx.clone()
        }
    }

    async fn serve(
        &self,
        service: Service,
        ctx: ServiceContext,
        listener: tokio::net::TcpListener,
        url: String,
    ) -> Spawned {
        match start(service, ctx, listener, url).await {
            Ok(s) => s,
            Err(e) => panic!(
                "{}-service did not start on {}: {e:#}",
                service.name(),
                self.backend
            ),
        }
    }

    /// Stops everything, the gateway first; a service that does not stop cleanly within 30 s
    /// fails the test.
    pub async fn stop(self) {
        #[cfg(feature = "gateway")]
        if let Some(gateway) = self.gateway {
            gateway.stop().await;
        }
        for chat in self.chats {
            chat.stop().await.unwrap();
        }
        #[cfg(feature = "agent")]
        for other in self.others {
            other.stop().await.unwrap();
        }
        if let Some(ingest) = self.ingest {
            ingest.stop().await.unwrap();
        }
        if let Some(admin) = self.admin {
            admin.stop().await.unwrap();
        }
    }
}

/// Starts one service's `serve()`.
async fn start(
    service: Service,
    ctx: ServiceContext,
    listener: tokio::net::TcpListener,
    url: String,
) -> anyhow::Result<Spawned> {
    match service {
        Service::Admin => Spawned::start(ctx, listener, url, docchat_admin_service::serve).await,
        Service::Ingest => Spawned::start(ctx, listener, url, docchat_ingest_service::serve).await,
        Service::Chat => Spawned::start(ctx, listener, url, docchat_chat_service::serve).await,
        #[cfg(feature = "agent")]
        Service::Agent => Spawned::start(ctx, listener, url, docchat_agent_service::serve).await,
        #[cfg(feature = "gateway")]
        Service::Scheduler => {
            Spawned::start(ctx, listener, url, docchat_scheduler_service::serve).await
        }
        #[cfg(not(feature = "gateway"))]
        other => anyhow::bail!(
            "{}-service needs docchat-test-stack's `agent` or `gateway` feature",
            other.name()
        ),
    }
}
