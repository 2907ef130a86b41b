//! chat-service: chat sessions, messages, completions and the model list.

pub mod attach;
pub mod background;
pub mod batch;
pub mod compat;
pub mod completions;
pub mod control;
pub mod entities;
pub mod events;
pub mod fairness;
pub mod gate;
pub mod grpc;
pub mod limits;
pub mod marks;
pub mod memory_blocks;
pub mod memory_grpc;
pub mod metrics;
pub mod migrations;
pub mod rate;
pub mod recovery;
pub mod replies;
pub mod sessions;
pub mod stream;
pub mod usage;

use docchat_common::bus::topics;
use std::sync::Arc;

use docchat_common::budget::CostGuard;
use docchat_common::bus::Subscription;
use docchat_common::clients::Clients;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::host::Host;
use docchat_common::outbox::OutboxRelay;
use docchat_common::settings::SettingsClient;
use docchat_inference::Catalog;
use docchat_proto::chat::v1::chat_service_server::ChatServiceServer;
use docchat_proto::chat::v1::memory_block_service_server::MemoryBlockServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How often chat's outbox relay drains at most (see `OutboxRelay::with_min_interval`).
const RELAY_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "chat").await
}

/// Runs chat-service on `listener` until `shutdown`, then drains its background tasks.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    docchat_common::metrics::declare(metrics::touch);
    // The models file, the upstreams named in the environment (listed now and every
    // upstream_refresh_seconds), and the local GGUF models found in the models directory.
    let catalog = Catalog::load(
        &ctx.config,
        docchat_inference::find_local_models(
            &ctx.config.models_dir,
            docchat_inference::local::DEFAULT_CONTEXT,
        ),
    )
    .await?;
    let local = docchat_inference::LocalOptions {
        threads: ctx.config.llm_threads,
        ..docchat_inference::LocalOptions::default()
    };
    let models = Arc::new(gate::LiveModels::new(catalog, local));
    let db = docchat_common::db::connect_serialized(&ctx.database_url(Service::Chat)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "chat").await?;

    let background = Background::new();
    ctx.bus
        .subscribe(
            Subscription::new(
                events::COLLECTION_EVENTS_GROUP,
                &[topics::INGEST_COLLECTION_DELETED],
            ),
            Arc::new(events::CollectionCleanup { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    ctx.bus
        .subscribe(
            Subscription::new(
                events::DOCUMENT_EVENTS_GROUP,
                &[topics::INGEST_DOCUMENT_DELETED],
            ),
            Arc::new(events::DocumentCleanup { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    // Every completion writes a usage.llm event: under load they go out in batches.
    let relay = OutboxRelay::new(Service::Chat, db.clone(), ctx.bus.clone())
        .with_min_interval(RELAY_MIN_INTERVAL);
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));

    let controls = control::Controls::default();
    ctx.bus
        .subscribe(
            Subscription::broadcast(control::CONTROL_GROUP, &[topics::CHAT_CONTROL]),
            Arc::new(control::ControlHandler(controls.clone())),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    let lease = limits::lease(&ctx.config);
    background.tracker.spawn(limits::renew_leases(
        db.clone(),
        controls.clone(),
        lease,
        background.token.clone(),
    ));
    // Replies a dead replica was generating: stored as interrupted once their lease ran out;
    // background responses past their retention: deleted.
    let retention = std::time::Duration::from_secs(ctx.config.chat_stream_retention_seconds);
    background.tracker.spawn(recovery::run(
        recovery::Recovery {
            db: db.clone(),
            controls: controls.clone(),
            relay: relay.clone(),
            lease,
            retention,
        },
        background.token.clone(),
    ));
    let clients = Clients::new(&ctx.config, ctx.keys.clone())?;
    let admin = clients.channel(Service::Admin).clone();
    let fairness = ctx.config.chat_fairness_enabled.then(|| {
        (
            fairness::Fairness::new(
                fairness::FairnessConfig::from_config(&ctx.config),
                Arc::new(fairness::SystemClock),
            ),
            rate::RateLimiter::new(db.clone(), ctx.config.chat_rate_limit_per_minute),
        )
    });
    let usage = usage::UsageBook::default();
    background.tracker.spawn(usage.clone().run(
        db.clone(),
        relay.clone(),
        background.token.clone(),
    ));
    // Readiness: degraded while a configured upstream does not list its models.
    let (upstreams_status, upstreams_answer) =
        tokio::sync::watch::channel(models.upstreams_answer());
    background.tracker.spawn(models.clone().run(
        std::time::Duration::from_secs(ctx.config.upstream_refresh_seconds),
        upstreams_status,
        background.token.clone(),
    ));
    let settings = SettingsClient::new(admin.clone(), ctx.keys.clone());
    let gate = gate::ModelGate::new(
        models,
        settings.clone(),
        CostGuard::new(admin, ctx.keys.clone()),
        fairness,
        usage,
    );
    let completer = completions::Completer {
        db: db.clone(),
        gate: gate.clone(),
        clients: clients.clone(),
        relay: relay.clone(),
        controls: controls.clone(),
        tasks: background.tracker.clone(),
        shutdown: shutdown.clone(),
        lease,
        max_pause: std::time::Duration::from_secs(ctx.config.chat_max_pause_seconds),
        min_similarity: ctx.config.rag_min_similarity,
    };

    // Requests are drained first; then consumers stop and the relay publishes what is left.
    Host::new(&ctx)
        .api(ChatServiceServer::new(grpc::ChatGrpc {
            db: db.clone(),
            relay,
            clients,
            completer,
            compat: compat::Compat { gate: gate.clone() },
            attach: attach::Attach {
                db: db.clone(),
                controls: controls.clone(),
                tasks: background.tracker.clone(),
                shutdown: shutdown.clone(),
            },
            backgrounds: background::Backgrounds {
                db: db.clone(),
                compat: compat::Compat { gate },
                controls: controls.clone(),
                bus: ctx.bus.clone(),
                tasks: background.tracker.clone(),
                shutdown: shutdown.clone(),
                lease,
                retention,
            },
            bus: ctx.bus.clone(),
            page_bytes: docchat_common::limits::list_page_bytes(&ctx.config),
        }))
        .api(MemoryBlockServiceServer::new(memory_grpc::MemoryGrpc {
            db: db.clone(),
            settings,
            page_bytes: docchat_common::limits::list_page_bytes(&ctx.config),
        }))
        .live_status(docchat_common::grpc::UPSTREAMS_HEALTH, upstreams_answer)
        .serve(listener, shutdown, background, db)
        .await
}
