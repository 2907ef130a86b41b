//! ingest-service: collections, documents, ingestion and retrieval.

pub mod collections;
pub mod entities;
pub mod events;
pub mod grpc;
pub mod migrations;

use std::sync::Arc;

use docchat_common::auth::AuthInterceptor;
use docchat_common::bus::Subscription;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::outbox::OutboxRelay;
use docchat_proto::ingest::v1::ingest_service_server::IngestServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "ingest").await
}

/// Runs ingest-service on `listener` until `shutdown`, then drains its background tasks.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&ctx.database_url(Service::Ingest)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "ingest").await?;

    let background = Background::new();
    ctx.bus
        .subscribe(
            Subscription::new(events::SESSION_EVENTS_GROUP, &["chat.session.*"]),
            Arc::new(events::SessionCounter { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    let relay = OutboxRelay::new(db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<IngestServiceServer<grpc::IngestGrpc>>()
        .await;
    let service = IngestServiceServer::with_interceptor(
        grpc::IngestGrpc {
            db: db.clone(),
            relay,
        },
        AuthInterceptor::new(ctx.keys.clone(), Service::Ingest),
    );
    let router = docchat_common::grpc::server()
        .add_service(health_service)
        .add_service(service);
    let served = docchat_common::grpc::serve_router(router, listener, shutdown).await;

    // Requests are drained; now stop consumers and let the relay publish what is left.
    background
        .shutdown(std::time::Duration::from_secs(
            ctx.config.shutdown_grace_seconds,
        ))
        .await;
    db.close().await?;
    served
}
