//! admin-service: users, API keys, roles, groups, permissions, runtime settings and the LLM
//! cost ledger and the job history.

mod conversions;
pub mod entities;
pub mod grpc;
pub mod identity;
pub mod job_history;
pub mod migrations;
pub mod settings;
pub mod usage;

use docchat_common::bus::topics;
use std::sync::Arc;

use docchat_common::bus::Subscription;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::host::Host;
use docchat_proto::admin::v1::admin_service_server::AdminServiceServer;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Applies admin-service's migrations to `url`.
pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "admin").await
}

/// Runs admin-service on `listener` until `shutdown`.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&ctx.database_url(Service::Admin)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "admin").await?;
    let bootstrap_key = ctx
        .config
        .bootstrap_admin_key
        .as_ref()
        .map(|k| k.expose_secret().to_owned());
    if let Some(generated) = identity::bootstrap(&db, bootstrap_key.as_deref()).await? {
        // Shown once: only the hash is stored.
        tracing::warn!(api_key = %generated, "generated the admin API key; store it now, it will not be shown again");
    }

    let background = Background::new();
    ctx.bus
        .subscribe(
            Subscription::new(usage::USAGE_GROUP, &[topics::USAGE_LLM]),
            Arc::new(usage::UsageLedger { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    ctx.bus
        .subscribe(
            Subscription::new(job_history::JOB_HISTORY_GROUP, &[topics::JOB_ANY]),
            Arc::new(job_history::JobHistoryIngest::new(db.clone())),
            &background.tracker,
            background.token.clone(),
        )
        .await?;

    Host::new(&ctx)
        .api(AdminServiceServer::new(grpc::AdminGrpc { db: db.clone() }))
        .serve(listener, shutdown, background, db)
        .await
}
