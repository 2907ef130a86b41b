//! gRPC plumbing every service shares: the server builder (tracing, connection age for
//! rebalancing), lazy client channels, health checks, the context a service is started
//! with, and the `main` of a service binary.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::auth::JwtKeys;
use crate::bus::EventBus;
use crate::config::{Config, Service};

/// What a service's `serve` receives besides its listener and shutdown token.
#[derive(Clone)]
pub struct ServiceContext {
    pub config: Arc<Config>,
    pub keys: Arc<JwtKeys>,
    pub bus: Arc<dyn EventBus>,
    /// One process runs every service: a PostgreSQL URL then names a server and each
    /// service uses its own database on it.
    pub standalone: bool,
}

impl ServiceContext {
    /// The database URL of `service` in this deployment.
    pub fn database_url(&self, service: Service) -> String {
        self.config.database_url_for(service, self.standalone)
    }

    /// A lazily connecting channel to another service.
    pub fn channel(&self, service: Service) -> anyhow::Result<Channel> {
        channel(self.config.service_url(service))
    }
}

/// What a tonic method answers.
pub type Reply<T> = Result<tonic::Response<T>, tonic::Status>;

/// A service call's result as a tonic answer (an [`ApiError`](crate::error::ApiError)
/// becomes its status).
pub fn ok<T>(result: crate::error::ApiResult<T>) -> Reply<T> {
    result
        .map(tonic::Response::new)
        .map_err(tonic::Status::from)
}

/// The layers every docchat gRPC server has: calls counted and timed
/// ([`crate::metrics::GrpcMetricsLayer`]).
pub type ServerLayers = tower_layer::Stack<crate::metrics::GrpcMetricsLayer, tower_layer::Identity>;

/// A server with request spans parented to the caller's trace, every call counted and timed,
/// and a bounded connection age, so HTTP/2 clients rebalance across replicas.
pub fn server() -> Server<ServerLayers> {
    Server::builder()
        .trace_fn(crate::telemetry::grpc_server_span)
        .max_connection_age(Duration::from_secs(300))
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .layer(crate::metrics::GrpcMetricsLayer::server())
}

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub async fn serve_router(
    router: tonic::transport::server::Router<ServerLayers>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    use tokio_stream::StreamExt;
    // `Server::tcp_nodelay` applies only to listeners tonic binds itself: set it on every
    // accepted connection, or small replies (stream events) wait ~40 ms for delayed ACKs.
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
        if let Ok(stream) = &conn
            && let Err(e) = stream.set_nodelay(true)
        {
            tracing::debug!(error = %e, "TCP_NODELAY not set on a gRPC connection");
        }
        conn
    });
    router
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// The largest gRPC message between docchat components: a whole REST body (the gateway's
/// `max_body_bytes`) plus room for its envelope, so what the gateway accepts, a service
/// accepts too (gRPC's own default is 4 MiB).
pub fn max_message_bytes(config: &Config) -> usize {
    config.max_body_bytes.saturating_add(1 << 20)
}

/// A channel that connects on first use and reconnects as needed.
pub fn channel(url: &str) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(url.to_owned())?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true)
        .connect_lazy())
}

/// Asks a service's `grpc.health.v1` whether it serves (the empty service name: overall).
/// agent-service's gRPC health name for its code sandbox: SERVING while code runs isolated
/// (a sandbox backend works), NOT_SERVING when code tools are refused or DOCCHAT_SANDBOX=none.
/// The gateway's readiness reads it.
pub const SANDBOX_HEALTH: &str = "docchat.agent.v1.Sandbox";
/// chat-service's gRPC health name of its model upstreams: not serving while one named in
/// the environment (OPENAI_BASE_URL, OLLAMA_BASE_URL) does not list its models.
pub const UPSTREAMS_HEALTH: &str = "docchat.chat.v1.Upstreams";

pub async fn check_health(channel: Channel) -> bool {
    check_status(channel, "").await
}

/// Whether the server reports `name` (a gRPC health service name; empty: the server) as
/// SERVING within 2 seconds.
pub async fn check_status(channel: Channel, name: &str) -> bool {
    let mut client = HealthClient::new(channel);
    let request = tonic::Request::new(HealthCheckRequest {
        service: name.to_owned(),
    });
    match tokio::time::timeout(Duration::from_secs(2), client.check(request)).await {
        Ok(Ok(response)) => response.into_inner().status == ServingStatus::Serving as i32,
        _ => false,
    }
}

/// Cancels `token` on SIGTERM or SIGINT.
#[expect(
    clippy::disallowed_methods,
    reason = "waits for a signal for the life of the process; it only cancels a token"
)]
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot listen for SIGTERM");
                        let _ = tokio::signal::ctrl_c().await;
                        token.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown requested");
        token.cancel();
    });
}

/// The `main` of a service binary: `serve` (default), `migrate` (apply migrations, exit) or
/// `healthcheck` (exit 0 when the service on `DOCCHAT_GRPC_ADDR` serves).
#[allow(clippy::print_stderr)] // before telemetry exists, stderr is the only channel
pub async fn service_main<S, SF, M, MF>(service: Service, serve: S, migrate: M) -> ExitCode
where
    S: FnOnce(ServiceContext, TcpListener, CancellationToken) -> SF,
    SF: std::future::Future<Output = anyhow::Result<()>>,
    M: FnOnce(Arc<Config>, String) -> MF,
    MF: std::future::Future<Output = anyhow::Result<()>>,
{
    let config = match Config::load() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("invalid configuration: {e:#}");
            return ExitCode::from(2);
        }
    };
    let name = format!("{}-service", service.name());
    let _telemetry = match crate::telemetry::init(&name, &config.log_format, &config.trace_filter) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("cannot start telemetry: {e:#}");
            return ExitCode::from(2);
        }
    };
    let command = std::env::args().nth(1).unwrap_or_default();
    let result = match command.as_str() {
        "" | "serve" => run_service(service, config, serve).await,
        "migrate" => {
            let url = config.database_url_for(service, false);
            migrate(config, url).await
        }
        "healthcheck" => {
            let addr = config.grpc_addr.replace("0.0.0.0", "127.0.0.1");
            match channel(&format!("http://{addr}")) {
                Ok(ch) => {
                    if check_health(ch).await {
                        Ok(())
                    } else {
                        Err(anyhow::anyhow!("{name} is not serving"))
                    }
                }
                Err(e) => Err(e),
            }
        }
        other => Err(anyhow::anyhow!(
            "unknown command {other:?} (expected serve, migrate or healthcheck)"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{name} failed");
            ExitCode::FAILURE
        }
    }
}

async fn run_service<S, SF>(service: Service, config: Arc<Config>, serve: S) -> anyhow::Result<()>
where
    S: FnOnce(ServiceContext, TcpListener, CancellationToken) -> SF,
    SF: std::future::Future<Output = anyhow::Result<()>>,
{
    let keys = Arc::new(JwtKeys::from_config(&config)?);
    let listener = TcpListener::bind(&config.grpc_addr).await?;
    tracing::info!(service = service.name(), addr = %config.grpc_addr, "serving grpc");
    let probe = match &config.probe_addr {
        Some(addr) => {
            let probe = TcpListener::bind(addr).await?;
            tracing::info!(service = service.name(), %addr, "serving probes and metrics");
            Some(probe)
        }
        None => None,
    };
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let own_url = format!(
        "http://{}",
        listener
            .local_addr()?
            .to_string()
            .replace("0.0.0.0", "127.0.0.1")
    );
    let ctx = ServiceContext {
        bus: crate::bus::from_config(&config),
        config,
        keys,
        standalone: false,
    };
    let Some(probe) = probe else {
        return serve(ctx, listener, shutdown).await;
    };
    // Ready while the service's own gRPC health says so; the probe outlives the gRPC
    // server's drain only by the time the join takes.
    let own = channel(&own_url)?;
    let ready = move || {
        let own = own.clone();
        async move { check_health(own).await }
    };
    let probe_stop = CancellationToken::new();
    let probe_task = crate::metrics::serve_probe(probe, ready, probe_stop.clone());
    let served = serve(ctx, listener, shutdown);
    tokio::pin!(probe_task);
    tokio::select! {
        result = served => {
            probe_stop.cancel();
            let _ = probe_task.await;
            result
        }
        result = &mut probe_task => {
            result.and_then(|()| Err(anyhow::anyhow!("the probe listener stopped")))
        }
    }
}

/// A service's background work (event consumers, outbox relay): spawned on one tracker,
/// stopped after the gRPC server has drained its requests, within the grace period.
pub struct Background {
    pub tracker: tokio_util::task::TaskTracker,
    pub token: CancellationToken,
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

impl Background {
    pub fn new() -> Self {
        Background {
            tracker: tokio_util::task::TaskTracker::new(),
            token: CancellationToken::new(),
        }
    }

    /// Stops consumers and lets the relay publish what is left, waiting at most `grace`.
    pub async fn shutdown(self, grace: Duration) {
        self.token.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("background tasks did not finish within the grace period");
        }
    }
}
