//! scheduler-service's metrics: due times found, claimed and run, how executions ended, and
//! how late a due time was claimed.

use std::sync::LazyLock;

use docchat_common::metrics::{counter_vec, histogram};
use prometheus::{Histogram, IntCounterVec};

static CLAIMS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_scheduler_claims_total",
        "Due task times this replica found, by result (claimed: it runs; skipped: the task \
         moved past it without running, as its limits say; raced: another replica had it).",
        &["result"],
    )
});
static EXECUTIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_scheduler_executions_total",
        "Task executions ended on this replica, by trigger (scheduled, manual) and outcome \
         (completed, failed, lapsed).",
        &["trigger", "outcome"],
    )
});
static CLAIM_LAG: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "docchat_scheduler_claim_lag_seconds",
        "From a task's due time to its claim.",
        &[
            0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
        ],
    )
});

/// Forces the families, their closed label sets at zero, so a scrape shows them before the
/// first claim.
pub fn touch() {
    for result in ["claimed", "skipped", "raced"] {
        CLAIMS.with_label_values(&[result]);
    }
    for trigger in ["scheduled", "manual"] {
        for outcome in ["completed", "failed", "lapsed"] {
            EXECUTIONS.with_label_values(&[trigger, outcome]);
        }
    }
    LazyLock::force(&CLAIM_LAG);
}

/// A due time found and what became of it; `lag`: how late it was found.
pub fn claimed(result: &'static str, lag: chrono::Duration) {
    CLAIMS.with_label_values(&[result]).inc();
    if result == "claimed" {
        CLAIM_LAG.observe(lag.num_milliseconds().max(0) as f64 / 1000.0);
    }
}

/// An execution ended.
pub fn ended(trigger: &str, outcome: &'static str) {
    let trigger = if trigger == "manual" {
        "manual"
    } else {
        "scheduled"
    };
    EXECUTIONS.with_label_values(&[trigger, outcome]).inc();
}
