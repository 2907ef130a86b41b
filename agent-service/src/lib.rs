//! agent-service: the agent loop ([`run`]), its tools ([`tools`]), tool preferences and the
//! built-in agents over gRPC ([`grpc`]); see ARCHITECTURE.md §7 "Agent".

pub mod archive;
pub mod egress;
pub mod events;
pub mod files;
pub mod grpc;
pub mod mcp;
pub mod migrations;
pub mod preferences;
pub mod run;
pub mod sandbox;
pub mod shelf;
pub mod stored;
pub mod tools;
pub mod workspaces;

use std::sync::Arc;

use docchat_common::budget::CostGuard;
use docchat_common::bus::{Subscription, topics};
use docchat_common::clients::Clients;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::host::Host;
use docchat_common::outbox::OutboxRelay;
use docchat_common::settings::SettingsClient;
use docchat_proto::agent::v1::agent_service_server::AgentServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "agent").await
}

/// fetch_url is on unless DOCCHAT_AGENT_FETCH is `off` (or `false`, `0`).
pub fn fetch_enabled() -> bool {
    !std::env::var("DOCCHAT_AGENT_FETCH").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "false" | "0"
        )
    })
}

pub use docchat_common::grpc::SANDBOX_HEALTH;

/// Runs agent-service on `listener` until `shutdown`.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    serve_with(
        ctx,
        listener,
        shutdown,
        tools::Catalog::builtin(),
        Vec::new(),
    )
    .await
}

/// As [`serve`], with a tool catalogue of the caller's (tests add tools) and hosts fetch_url
/// may reach on private addresses.
pub async fn serve_with(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
    catalog: tools::Catalog,
    fetch_allow: Vec<String>,
) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&ctx.database_url(Service::Agent)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "agent").await?;
    // ext-mcp: the administrator's egress allow list (DOCCHAT_AGENT_EGRESS_ALLOW) joins the
    // tests' own, for fetch_url and remote MCP servers alike.
    let mut fetch_allow = fetch_allow;
    fetch_allow.extend(mcp::egress_allow_from_env());
    let background = Background::new();
    let relay = OutboxRelay::new(db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));

    let workspaces = ctx.config.data_dir.join("agent").join("workspaces");
    match events::sweep_orphans(&db, &workspaces).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            removed = n,
            "removed workspaces of sessions deleted meanwhile"
        ),
        Err(e) => tracing::warn!(error = %e, "workspaces of deleted sessions not swept"),
    }
    ctx.bus
        .subscribe(
            Subscription::new(
                events::SESSION_EVENTS_GROUP,
                &[topics::CHAT_SESSION_DELETED],
            ),
            Arc::new(events::SessionRecords { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    ctx.bus
        .subscribe(
            Subscription::broadcast(events::SESSION_DISK_GROUP, &[topics::CHAT_SESSION_DELETED]),
            Arc::new(events::SessionDisk {
                workspaces: workspaces.clone(),
            }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;

    let registry = docchat_inference::Registry::load(ctx.config.models_file.as_deref())?;
    let clients = Clients::new(&ctx.config, ctx.keys.clone())?;
    let budget = run::budget::CostBudget {
        settings: SettingsClient::new(ctx.channel(Service::Admin)?, ctx.keys.clone()),
        guard: CostGuard::new(ctx.channel(Service::Admin)?, ctx.keys.clone()),
        db: db.clone(),
        relay,
    };
    let sandbox = sandbox::Sandbox::start(sandbox::Settings::from_env(
        ctx.config.data_dir.join("agent").join("sandbox"),
    ))
    .await;
    let sandbox_status = sandbox.status();
    let engine = run::Engine {
        catalog,
        extensions: None,
        stored: Some(Arc::new(stored::Stored::new(db.clone(), clients.clone()))),
        deps: Arc::new(tools::ToolDeps {
            code: Arc::new(sandbox),
            shelf: Some(Arc::new(shelf::Shelf::new(
                ctx.config.data_dir.join("agent").join("collections"),
                clients.clone(),
            ))),
            clients: Some(clients),
            fetch: fetch_enabled(),
            fetch_allow,
        }),
        budget: Arc::new(budget),
    };
    let api = grpc::AgentGrpc {
        db: db.clone(),
        engine,
        models: Arc::new(grpc::AgentModels::new(registry)),
        workspaces,
        tracker: background.tracker.clone(),
        shutdown: shutdown.clone(),
    };
    Host::new(&ctx)
        .api(AgentServiceServer::new(api))
        // Readiness of code execution, apart from the service's: without a sandbox the
        // other tools still work.
        .status(
            SANDBOX_HEALTH,
            !matches!(sandbox_status.backend, "unavailable" | "none"),
        )
        .serve(listener, shutdown, background, db)
        .await
}
