//! scheduler-service: scheduled tasks and their executions (SPEC.md "Scheduled tasks",
//! AGENTS.md §5). It migrates its store, relays its outbox, answers gRPC health and serves
//! `docchat.scheduler.v1.SchedulerService`.

pub mod engine;
pub mod entities;
pub mod executions;
pub mod grpc;
pub mod metrics;
pub mod migrations;
pub mod schedule;
pub mod summary;
pub mod task_update;
pub mod tasks;

use std::sync::Arc;

use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::host::Host;
use docchat_common::outbox::OutboxRelay;
use docchat_proto::scheduler::v1::scheduler_service_server::SchedulerServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "scheduler").await
}

/// Runs scheduler-service on `listener` until `shutdown`.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    docchat_common::metrics::declare(metrics::touch);
    let db = docchat_common::db::connect(&ctx.database_url(Service::Scheduler)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "scheduler").await?;
    let background = Background::new();
    let relay = OutboxRelay::new(Service::Scheduler, db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));
    // Claims due tasks, runs them, keeps and reaps leases (engine/).
    let engine = engine::Engine::new(&ctx, db.clone(), relay, &background)?;
    engine.start();

    Host::new(&ctx)
        .api(SchedulerServiceServer::new(grpc::SchedulerGrpc {
            db: db.clone(),
            engine: Arc::new(engine),
            page_bytes: docchat_common::limits::list_page_bytes(&ctx.config),
        }))
        .serve(listener, shutdown, background, db)
        .await
}
