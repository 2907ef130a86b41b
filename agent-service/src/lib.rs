//! agent-service: the agent loop ([`run`]), its tools ([`tools`]), tool preferences and the
//! built-in agents over gRPC ([`grpc`]); see ARCHITECTURE.md §7 "Agent".

pub mod archive;
pub mod browser;
pub mod budget;
pub mod custom_agents;
pub mod custom_tools;
pub mod egress;
pub mod entities;
pub mod events;
pub mod files;
pub mod grpc;
pub mod jobs;
pub mod mcp;
pub mod metrics;
pub mod migrations;
pub mod paths;
pub mod preferences;
pub mod run;
pub mod run_leases;
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
use docchat_proto::agent::v1::custom_agent_service_server::CustomAgentServiceServer;
use docchat_proto::agent::v1::custom_tool_service_server::CustomToolServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "agent").await
}

/// The sandbox's settings from `config` (`DOCCHAT_SANDBOX*`, the workspace quota); an
/// unknown backend name is an error the sandbox reports as its reason to be unavailable.
pub fn sandbox_settings(config: &Config) -> Result<docchat_sandbox::Settings, String> {
    let slots = config.sandbox_slots.clamp(1, 1024);
    Ok(docchat_sandbox::Settings {
        mode: docchat_sandbox::Mode::parse(&config.sandbox)?,
        dir: config.data_dir.join("agent").join("sandbox"),
        slots,
        user_slots: config
            .sandbox_user_slots
            .unwrap_or((slots / 4).max(1))
            .clamp(1, slots),
        max_run: std::time::Duration::from_secs(config.sandbox_max_run_seconds.max(1)),
        workspace_quota: config.workspace_quota_bytes(),
        uid_base: config.sandbox_uid_base.max(1000),
        helper: config.sandbox_helper.clone(),
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
    docchat_common::metrics::declare(metrics::touch);
    let db = docchat_common::db::connect(&ctx.database_url(Service::Agent)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "agent").await?;
    // The administrator's egress allow list (DOCCHAT_AGENT_EGRESS_ALLOW) joins the tests'
    // own, for fetch_url, remote MCP servers and browser actions alike.
    let mut fetch_allow = fetch_allow;
    fetch_allow.extend(ctx.config.agent_egress_allow.iter().cloned());
    let background = Background::new();
    let relay = OutboxRelay::new(Service::Agent, db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));
    let leases = run_leases::Leases::new(
        format!(
            "{}-{}",
            ctx.config.hostname.as_deref().unwrap_or("agent"),
            docchat_common::ids::short()
        ),
        std::time::Duration::from_secs(ctx.config.job_lease_seconds.max(1)),
    );
    background.tracker.spawn(leases.clone().keep(
        db.clone(),
        relay.clone(),
        background.token.clone(),
    ));

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

    // The models file and the upstreams named in the environment, as listed at start.
    let registry = docchat_inference::Catalog::load(&ctx.config, Vec::new())
        .await?
        .registry()
        .as_ref()
        .clone();
    let clients = Clients::new(&ctx.config, ctx.keys.clone())?;
    let budget = budget::CostBudget {
        settings: SettingsClient::new(ctx.channel(Service::Admin)?, ctx.keys.clone()),
        guard: CostGuard::new(ctx.channel(Service::Admin)?, ctx.keys.clone()),
        db: db.clone(),
        relay: relay.clone(),
    };
    let sandbox = docchat_sandbox::Sandbox::start(sandbox_settings(&ctx.config)).await;
    let sandbox_status = sandbox.status();
    // Stored keys (encrypted at rest): custom agents' environment, and the `Secrets` of
    // custom tools (MCP headers and environment references).
    let agent_keys = custom_agents::keys::KeyStore {
        db: db.clone(),
        cipher: Arc::new(custom_agents::cipher::Cipher::from_deployment(
            &ctx.config,
            ctx.standalone,
        )?),
    };
    let sandbox: Arc<dyn docchat_sandbox::CodeRunner> =
        Arc::new(metrics::MeteredRunner(Arc::new(sandbox)));
    {
        let sandbox = sandbox.clone();
        docchat_common::metrics::before_render(
            "agent.sandbox_slots",
            Box::new(move || metrics::MeteredRunner::read_slots(sandbox.as_ref())),
        );
    }
    let custom_tools = Arc::new(custom_tools(
        &ctx,
        db.clone(),
        sandbox.clone(),
        Arc::new(agent_keys.clone()),
        fetch_allow.clone(),
        registry.clone(),
    ));
    let custom_agent_runner = Arc::new(custom_agents::run::Runner {
        db: db.clone(),
        keys: agent_keys.clone(),
        dir: ctx.config.data_dir.join("agent").join("custom_agents"),
    });
    let budget: Arc<dyn budget::Budget> = Arc::new(budget);
    let prompts = prompt_writer(&registry, budget.clone());
    let engine = run::Engine {
        catalog,
        extensions: Some(custom_tools.clone()),
        stored: Some(Arc::new(stored::Stored::new(
            db.clone(),
            clients.clone(),
            ctx.config.workspace_quota_bytes(),
        ))),
        deps: Arc::new(tools::ToolDeps {
            code: sandbox,
            shelf: Some(Arc::new(shelf::Shelf::new(
                ctx.config.data_dir.join("agent").join("collections"),
                clients.clone(),
            ))),
            clients: Some(clients),
            fetch: ctx.config.agent_fetch,
            fetch_allow,
            workspace_quota: ctx.config.workspace_quota_bytes(),
        }),
        budget,
    };
    let api = grpc::AgentGrpc {
        db: db.clone(),
        admission: Arc::new(run::admit::Admission {
            db: db.clone(),
            engine,
            models: run::admit::AgentModels::new(registry),
            custom_agents: Some(custom_agent_runner),
            workspaces,
            user_disk_quota: ctx.config.user_disk_quota_bytes(),
        }),
        tracker: background.tracker.clone(),
        shutdown: shutdown.clone(),
        jobs: jobs::RunJobs {
            db: db.clone(),
            relay,
            leases,
        },
    };
    Host::new(&ctx)
        .api(AgentServiceServer::new(api))
        .api(CustomToolServiceServer::new(
            custom_tools::grpc::CustomToolGrpc {
                tools: custom_tools,
                prompts,
            },
        ))
        .api(CustomAgentServiceServer::new(
            custom_agents::grpc::CustomAgentGrpc {
                db: db.clone(),
                keys: agent_keys,
            },
        ))
        // Readiness of code execution, apart from the service's: without a sandbox the
        // other tools still work.
        .status(
            SANDBOX_HEALTH,
            !matches!(sandbox_status.backend, "unavailable" | "none"),
        )
        .serve(listener, shutdown, background, db)
        .await
}

/// The registry's default chat model writing general_code tools' system prompts (none
/// without one).
fn prompt_writer(
    registry: &docchat_inference::Registry,
    budget: Arc<dyn budget::Budget>,
) -> Option<Arc<dyn custom_tools::prompt::PromptWriter>> {
    let entry = registry.default_chat_model()?.clone();
    match docchat_inference::ChatModel::from_entry(
        &entry,
        &docchat_inference::LocalOptions::default(),
    ) {
        Ok(model) => Some(Arc::new(custom_tools::prompt::ModelPrompts {
            model: Arc::new(model),
            entry,
            budget,
        })),
        Err(e) => {
            tracing::warn!(error = %e, "no default chat model for custom tools' system prompts");
            None
        }
    }
}

/// The caller's custom tools, with the opener of each tool type (each kind's module) and the
/// MCP inspector; their code runs in `code` (the sandbox), their keys come from `secrets`.
fn custom_tools(
    ctx: &ServiceContext,
    db: sea_orm::DatabaseConnection,
    code: Arc<dyn docchat_sandbox::CodeRunner>,
    secrets: Arc<dyn tools::custom::Secrets>,
    egress_allow: Vec<String>,
    registry: docchat_inference::Registry,
) -> custom_tools::CustomTools {
    use tools::custom::ToolType;
    let agent_dir = ctx.config.data_dir.join("agent");
    let (mcp_openers, inspector) = mcp::for_service(
        code,
        mcp::Settings::new(agent_dir.join("mcp"), egress_allow),
        registry,
    );
    let mut tools = custom_tools::CustomTools::new(db, agent_dir.join("custom_tools"))
        .with_secrets(secrets)
        // general_code: a Python function run in the sandbox (custom_tools/general_code.rs).
        .with_opener(
            ToolType::GeneralCode,
            Arc::new(custom_tools::general_code::GeneralCode::default()),
        )
        // browser_action: a script driving headless chromium in the sandbox, its web through
        // the egress proxy (browser/).
        .with_opener(
            ToolType::BrowserAction,
            Arc::new(browser::BrowserOpener::new(agent_dir.join("browser"))),
        );
    // local_mcp (a stdio server in the sandbox) and remote_mcp (HTTP or SSE through the
    // egress rule): mcp/.
    for (kind, opener) in mcp_openers {
        tools = tools.with_opener(kind, opener);
    }
    tools.inspector = Some(inspector);
    tools
}
