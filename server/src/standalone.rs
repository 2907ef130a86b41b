//! Standalone mode: the five services and the gateway in one process, services on loopback
//! gRPC ports, SQLite under the data dir and the in-process bus (unless configured
//! otherwise, which tests use to run the same process against PostgreSQL and RabbitMQ).

use std::sync::Arc;
use std::time::Duration;

use docchat_common::JwtKeys;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{ServiceContext, check_health};
use rand::Rng;
use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Binds the services' loopback listeners and points the config at them.
async fn bind_services(config: &mut Config) -> anyhow::Result<Vec<(Service, TcpListener)>> {
    let mut out = Vec::new();
    for service in Service::ALL {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        config.set_service_url(service, format!("http://{}", listener.local_addr()?));
        out.push((service, listener));
    }
    Ok(out)
}

/// A random secret for this process: in standalone mode nothing outside it needs it.
fn ensure_jwt_secret(config: &mut Config) {
    if config.internal_jwt_secret.is_none() {
        let secret: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(48)
            .map(char::from)
            .collect();
        config.internal_jwt_secret = Some(SecretString::from(secret));
    }
}

/// Runs everything until `shutdown`; `http` is the REST listener (bound by the caller so
/// tests can use port 0).
pub async fn run(
    mut config: Config,
    http: std::net::TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    ensure_jwt_secret(&mut config);
    std::fs::create_dir_all(&config.data_dir)?;
    let listeners = bind_services(&mut config).await?;
    let config = Arc::new(config);
    let keys = Arc::new(JwtKeys::from_config(&config)?);
    let ctx = ServiceContext {
        bus: docchat_common::bus::from_config(&config),
        config: config.clone(),
        keys: keys.clone(),
        standalone: true,
    };

    let services_stop = CancellationToken::new();
    let mut tasks = JoinSet::new();
    for (service, listener) in listeners {
        let ctx = ctx.clone();
        let stop = services_stop.clone();
        tasks.spawn(async move {
            let result = match service {
                Service::Admin => docchat_admin_service::serve(ctx, listener, stop).await,
                Service::Ingest => docchat_ingest_service::serve(ctx, listener, stop).await,
                Service::Chat => docchat_chat_service::serve(ctx, listener, stop).await,
                Service::Agent => docchat_agent_service::serve(ctx, listener, stop).await,
                Service::Scheduler => docchat_scheduler_service::serve(ctx, listener, stop).await,
            };
            (service, result)
        });
    }

    // Serve REST only once every service answers (admin has bootstrapped by then).
    let ready = wait_until_ready(&config, &mut tasks).await;
    let result = match ready {
        Ok(()) => {
            tracing::info!(addr = %http.local_addr()?, "docchat standalone is ready");
            let http_shutdown = shutdown.clone();
            let http_result = tokio::select! {
                r = docchat_gateway::serve_http(config.clone(), keys, http, http_shutdown) => r,
                Some(joined) = tasks.join_next() => match joined {
                    Ok((service, Err(e))) => Err(e.context(format!("{}-service stopped", service.name()))),
                    Ok((service, Ok(()))) => Err(anyhow::anyhow!("{}-service stopped unexpectedly", service.name())),
                    Err(e) => Err(anyhow::anyhow!("a service panicked: {e}")),
                },
            };
            http_result
        }
        Err(e) => Err(e),
    };
    services_stop.cancel();
    while let Some(joined) = tasks.join_next().await {
        if let Ok((service, Err(e))) = joined {
            tracing::warn!(
                service = service.name(),
                error = format!("{e:#}"),
                "service ended with an error"
            );
        }
    }
    result
}

async fn wait_until_ready(
    config: &Config,
    tasks: &mut JoinSet<(Service, anyhow::Result<()>)>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut pending: Vec<Service> = Service::ALL.to_vec();
    while !pending.is_empty() {
        if let Some(joined) = tasks.try_join_next() {
            return Err(match joined {
                Ok((service, Err(e))) => {
                    e.context(format!("{}-service failed to start", service.name()))
                }
                Ok((service, Ok(()))) => {
                    anyhow::anyhow!("{}-service exited during start", service.name())
                }
                Err(e) => anyhow::anyhow!("a service panicked during start: {e}"),
            });
        }
        let mut still = Vec::new();
        for service in pending {
            let channel = docchat_common::grpc::channel(config.service_url(service))?;
            if !check_health(channel).await {
                still.push(service);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("services not ready after 120s: {pending:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
