//! chat-service's metrics: completions by rag type and outcome, time to first token and
//! generation time by model, the wait for a fairness slot, and the generations running.
//! Tokens and cost are counted where they are booked (`docchat_llm_*`, in common), model
//! upstream calls where they are made (`docchat_model_*`, in inference).

use std::sync::LazyLock;

use docchat_common::metrics::{SLOW_BUCKETS, counter_vec, gauge, gauge_vec, histogram_vec};
use prometheus::{HistogramVec, IntCounterVec, IntGauge, IntGaugeVec};

static COMPLETIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_chat_completions_total",
        "Completions ended, by rag type (llm_only, rag, hyde1, hyde2, rag+, all_data, agent) \
         and outcome (ok, error; a reply stopped by its user is ok).",
        &["rag_type", "outcome"],
    )
});
static FIRST_TOKEN: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_chat_time_to_first_token_seconds",
        "From a completion's start (its fairness wait and retrieval included) to the first \
         text of its answer, by registry model name.",
        &["model"],
        SLOW_BUCKETS,
    )
});
static GENERATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_chat_generation_seconds",
        "From a completion's start to its reply being stored, by registry model name.",
        &["model"],
        SLOW_BUCKETS,
    )
});
static QUEUE_WAIT: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_chat_queue_wait_seconds",
        "Time a completion waited for a fairness slot (chat_fairness_slots), by priority.",
        &["priority"],
        SLOW_BUCKETS,
    )
});
static QUEUED: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "docchat_chat_queued_completions",
        "Completions waiting for a fairness slot now, by priority.",
        &["priority"],
    )
});
static ACTIVE: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "docchat_chat_active_generations",
        "Completions being generated now (queued, retrieving or streaming), on this replica.",
    )
});

/// The rag types completions are counted under ([`crate::completions::RagMode::name`]).
const RAG_TYPES: [&str; 7] = [
    "llm_only", "rag", "hyde1", "hyde2", "rag+", "all_data", "agent",
];
const PRIORITIES: [&str; 3] = ["high", "normal", "low"];

/// Forces the families, their closed label sets at zero, so a scrape shows them (and
/// `rate()` sees the first one) before the first completion.
pub fn touch() {
    for rag_type in RAG_TYPES {
        for outcome in ["ok", "error"] {
            COMPLETIONS.with_label_values(&[rag_type, outcome]);
        }
    }
    for priority in PRIORITIES {
        QUEUED.with_label_values(&[priority]);
        QUEUE_WAIT.with_label_values(&[priority]);
    }
    LazyLock::force(&FIRST_TOKEN);
    LazyLock::force(&GENERATION);
    LazyLock::force(&ACTIVE);
}

/// One ended completion.
pub fn completion(
    rag_type: &str,
    outcome: &str,
    model: &str,
    first_token: Option<f64>,
    elapsed: f64,
) {
    COMPLETIONS.with_label_values(&[rag_type, outcome]).inc();
    if let Some(t) = first_token {
        FIRST_TOKEN.with_label_values(&[model]).observe(t);
    }
    GENERATION.with_label_values(&[model]).observe(elapsed);
}

/// A generation in progress, counted while it lives.
pub fn active() -> docchat_common::metrics::Held {
    docchat_common::metrics::hold(&ACTIVE)
}

/// A completion waiting for its slot, counted while it waits (however the wait ends).
pub struct Queued {
    priority: &'static str,
    since: std::time::Instant,
    _held: docchat_common::metrics::Held,
}

impl Queued {
    pub fn enter(priority: &'static str) -> Queued {
        Queued {
            priority,
            since: std::time::Instant::now(),
            _held: docchat_common::metrics::hold(&QUEUED.with_label_values(&[priority])),
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        QUEUE_WAIT
            .with_label_values(&[self.priority])
            .observe(self.since.elapsed().as_secs_f64());
    }
}
