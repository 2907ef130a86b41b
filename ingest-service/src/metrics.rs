//! ingest-service's metrics: jobs by outcome, running and queued, pages and bytes ingested,
//! seconds per pipeline stage, text recognition's pages, the embedder's batches, and
//! retrieval's stages.

use std::sync::LazyLock;
use std::time::Duration;

use docchat_common::metrics::{
    LATENCY_BUCKETS, SLOW_BUCKETS, counter, counter_vec, gauge, histogram, histogram_vec,
};
use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
};

use crate::entities::jobs;

static JOBS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_ingest_jobs_total",
        "Ingestion jobs this replica's workers ended, by outcome (done, failed, timeout, lost: \
         canceled or taken over, requeued: handed back at shutdown).",
        &["outcome"],
    )
});
static RUNNING: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "docchat_ingest_jobs_running",
        "Ingestion jobs this replica's workers run now.",
    )
});
static QUEUED: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "docchat_ingest_jobs_queued",
        "Ingestion jobs waiting for a worker, all replicas (read twice per lease).",
    )
});
static OLDEST: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "docchat_ingest_queue_oldest_age_seconds",
        "Age of the oldest ingestion job waiting for a worker (0 when none waits).",
    )
});
static PAGES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "docchat_ingest_pages_total",
        "Pages of documents stored by ingestion.",
    )
});
static BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "docchat_ingest_bytes_total",
        "Bytes of uploads stored as documents by ingestion.",
    )
});
static STAGE: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_ingest_stage_seconds",
        "Seconds an ingestion spent per stage (read, parse, transcribe, chunk, embed, extras, \
         index).",
        &["stage"],
        SLOW_BUCKETS,
    )
});
static EMBEDDED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_embed_texts_total",
        "Texts embedded for ingestion, by embedding model (rate() of it is the throughput).",
        &["model"],
    )
});
static EMBED_BATCH: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_embed_batch_seconds",
        "Seconds per batch of texts embedded for ingestion, by embedding model.",
        &["model"],
        SLOW_BUCKETS,
    )
});
static RETRIEVAL: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_retrieval_stage_seconds",
        "Seconds per retrieval stage of a search (embed, dense, lexical, fusion, rerank, \
         total).",
        &["stage"],
        LATENCY_BUCKETS,
    )
});

static OCR_PAGES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_ocr_pages_total",
        "Pages (and images) through text recognition, by outcome (ok, failed: a decoder or \
         a limit stopped it, timeout).",
        &["outcome"],
    )
});
static OCR_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "docchat_ocr_page_seconds",
        "One page's text recognition in the sandbox: rendering and recognizing it.",
        SLOW_BUCKETS,
    )
});

/// Forces the families, their closed label sets at zero, so a scrape shows them before the
/// first job.
pub fn touch() {
    for outcome in ["done", "failed", "timeout", "lost", "requeued"] {
        JOBS.with_label_values(&[outcome]);
    }
    for stage in [
        "read",
        "parse",
        "ocr",
        "transcribe",
        "chunk",
        "embed",
        "extras",
        "index",
    ] {
        STAGE.with_label_values(&[stage]);
    }
    for stage in ["embed", "dense", "lexical", "fusion", "rerank", "total"] {
        RETRIEVAL.with_label_values(&[stage]);
    }
    LazyLock::force(&RUNNING);
    LazyLock::force(&QUEUED);
    LazyLock::force(&OLDEST);
    LazyLock::force(&PAGES);
    LazyLock::force(&BYTES);
    LazyLock::force(&EMBEDDED);
    LazyLock::force(&EMBED_BATCH);
    for outcome in ["ok", "failed", "timeout"] {
        OCR_PAGES.with_label_values(&[outcome]);
    }
    LazyLock::force(&OCR_SECONDS);
}

/// One page's (or image's) recognition ended with `outcome` (`ok`, `failed`, `timeout`)
/// after `elapsed`.
pub fn ocr_page(outcome: &'static str, elapsed: Duration) {
    OCR_PAGES.with_label_values(&[outcome]).inc();
    OCR_SECONDS.observe(elapsed.as_secs_f64());
}

/// A job ended with `outcome`.
pub fn job_ended(outcome: &'static str) {
    JOBS.with_label_values(&[outcome]).inc();
}

/// A document stored: its pages and its upload's bytes.
pub fn stored(pages: usize, bytes: i64) {
    PAGES.inc_by(u64::try_from(pages).unwrap_or(0));
    BYTES.inc_by(u64::try_from(bytes).unwrap_or(0));
}

/// One stage of one ingestion took `elapsed`.
pub fn stage(stage: &'static str, elapsed: Duration) {
    STAGE
        .with_label_values(&[stage])
        .observe(elapsed.as_secs_f64());
}

/// One batch of `texts` embedded by `model` in `elapsed`.
pub fn embedded(model: &str, texts: usize, elapsed: Duration) {
    EMBEDDED
        .with_label_values(&[model])
        .inc_by(u64::try_from(texts).unwrap_or(0));
    EMBED_BATCH
        .with_label_values(&[model])
        .observe(elapsed.as_secs_f64());
}

/// A search's stage timings: (stage, milliseconds) as its trace has them. Stages a search
/// skipped (no reranker, no dense search) are not observed.
pub fn searched(stages: &[(&'static str, f64)]) {
    for &(stage, ms) in stages {
        if ms > 0.0 {
            RETRIEVAL.with_label_values(&[stage]).observe(ms / 1000.0);
        }
    }
}

/// A job being run here, counted while it lives.
pub fn running() -> docchat_common::metrics::Held {
    docchat_common::metrics::hold(&RUNNING)
}

/// Reads the queue's depth and its oldest job's age into the gauges.
pub async fn read_queue(db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
    let queued = jobs::Entity::find().filter(jobs::Column::Status.eq(crate::jobs::QUEUED));
    let count = queued.clone().count(db).await?;
    let oldest = queued
        .order_by_asc(jobs::Column::CreatedAt)
        .one(db)
        .await?
        .map(|job| {
            (docchat_common::time::now() - job.created_at)
                .num_seconds()
                .max(0)
        })
        .unwrap_or(0);
    QUEUED.set(i64::try_from(count).unwrap_or(i64::MAX));
    OLDEST.set(oldest);
    Ok(())
}
