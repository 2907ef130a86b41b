//! agent-service's metrics: runs by outcome, tool calls by tool and outcome, the sandbox's
//! start and run seconds, and its slots (in use and waiting, against the total).

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use docchat_common::metrics::{SLOW_BUCKETS, counter_vec, gauge_vec, histogram_vec};
use docchat_sandbox::{CodeOutput, CodeRunner, CodeSpec, Grants, Pipes};
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};
use tokio_util::sync::CancellationToken;

static RUNS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_agent_runs_total",
        "Agent runs ended, by outcome (ok, failed, stopped: by the user or its time limit).",
        &["outcome"],
    )
});
static RUN_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_agent_run_seconds",
        "Agent run duration, by outcome.",
        &["outcome"],
        SLOW_BUCKETS,
    )
});
static TOOL_CALLS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_agent_tool_calls_total",
        "Tool calls of agent runs, by tool (built-in names; custom for users' own tools) and \
         outcome (ok, error).",
        &["tool", "outcome"],
    )
});
static TOOL_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_agent_tool_call_seconds",
        "Tool call duration, by tool (built-in names; custom for users' own tools).",
        &["tool"],
        SLOW_BUCKETS,
    )
});
static SANDBOX_START: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_sandbox_start_seconds",
        "From a code run's request to its program starting (the wait for a slot and the \
         workspace's preparation included), by backend.",
        &["backend"],
        SLOW_BUCKETS,
    )
});
static SANDBOX_RUN: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_sandbox_run_seconds",
        "Whole code runs in the sandbox, by backend and outcome (ok, error: the program \
         failed or was refused, timeout, cancelled).",
        &["backend", "outcome"],
        SLOW_BUCKETS,
    )
});
static SLOTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "docchat_sandbox_slots",
        "The code sandbox's run slots on this replica, by state (total, in_use, waiting).",
        &["state"],
    )
});

/// Forces the families, their closed label sets at zero, so a scrape shows them before the
/// first run.
pub fn touch() {
    for outcome in ["ok", "failed", "stopped"] {
        RUNS.with_label_values(&[outcome]);
        RUN_SECONDS.with_label_values(&[outcome]);
    }
    for tool in BUILT_IN.iter().copied().chain(["custom"]) {
        for outcome in ["ok", "error"] {
            TOOL_CALLS.with_label_values(&[tool, outcome]);
        }
    }
    for state in ["total", "in_use", "waiting"] {
        SLOTS.with_label_values(&[state]);
    }
    LazyLock::force(&TOOL_SECONDS);
    LazyLock::force(&SANDBOX_START);
    LazyLock::force(&SANDBOX_RUN);
}

/// One ended run.
pub fn run_ended(outcome: &'static str, started: Instant) {
    RUNS.with_label_values(&[outcome]).inc();
    RUN_SECONDS
        .with_label_values(&[outcome])
        .observe(started.elapsed().as_secs_f64());
}

/// docchat's own tools' names (made once: the catalog's names borrow from it).
static BUILT_IN: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let mut names = vec![crate::tools::memory::NAME];
    names.extend(
        crate::tools::Catalog::builtin()
            .names()
            .map(|n| -> &'static str { Box::leak(n.to_owned().into_boxed_str()) }),
    );
    names
});

/// The names tool calls are counted under: docchat's own tools; a user's tool is `custom`.
fn tool_label(name: &str) -> &'static str {
    BUILT_IN
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("custom")
}

/// One tool call's end.
pub fn tool_call(name: &str, ok: bool, elapsed: std::time::Duration) {
    let tool = tool_label(name);
    TOOL_CALLS
        .with_label_values(&[tool, if ok { "ok" } else { "error" }])
        .inc();
    TOOL_SECONDS
        .with_label_values(&[tool])
        .observe(elapsed.as_secs_f64());
}

/// The sandbox, its runs counted and timed and its slots read at every scrape.
pub struct MeteredRunner(pub Arc<dyn CodeRunner>);

impl MeteredRunner {
    fn backend(&self) -> &'static str {
        self.0.load().map_or("none", |(backend, _)| backend)
    }

    fn record(&self, started: Instant, result: &Result<CodeOutput, String>) {
        let backend = self.backend();
        let outcome = match result {
            Ok(out) if out.timed_out => "timeout",
            Ok(out) if out.cancelled => "cancelled",
            Ok(out) if out.exit_code == Some(0) => "ok",
            _ => "error",
        };
        if let Ok(CodeOutput {
            started_after: Some(after),
            ..
        }) = result
        {
            SANDBOX_START
                .with_label_values(&[backend])
                .observe(after.as_secs_f64());
        }
        SANDBOX_RUN
            .with_label_values(&[backend, outcome])
            .observe(started.elapsed().as_secs_f64());
    }

    /// Sets the slot gauges from the runner's load (called before every scrape).
    pub fn read_slots(runner: &dyn CodeRunner) {
        let load = runner.load().map(|(_, l)| l).unwrap_or_default();
        SLOTS
            .with_label_values(&["total"])
            .set(i64::from(load.total));
        SLOTS
            .with_label_values(&["in_use"])
            .set(i64::from(load.in_use));
        SLOTS
            .with_label_values(&["waiting"])
            .set(i64::from(load.waiting));
    }
}

#[async_trait::async_trait]
impl CodeRunner for MeteredRunner {
    async fn run(&self, spec: CodeSpec, cancel: &CancellationToken) -> Result<CodeOutput, String> {
        let started = Instant::now();
        let result = self.0.run(spec, cancel).await;
        self.record(started, &result);
        result
    }

    async fn run_with(
        &self,
        spec: CodeSpec,
        grants: &Grants,
        cancel: &CancellationToken,
    ) -> Result<CodeOutput, String> {
        let started = Instant::now();
        let result = self.0.run_with(spec, grants, cancel).await;
        self.record(started, &result);
        result
    }

    fn private_network(&self) -> bool {
        self.0.private_network()
    }

    fn available(&self) -> bool {
        self.0.available()
    }

    fn load(&self) -> Option<(&'static str, docchat_sandbox::fair::Load)> {
        self.0.load()
    }

    fn documents_at(&self, host: &std::path::Path) -> std::path::PathBuf {
        self.0.documents_at(host)
    }

    async fn serve(
        &self,
        spec: CodeSpec,
        started: tokio::sync::oneshot::Sender<Result<Pipes, String>>,
        cancel: CancellationToken,
    ) {
        self.0.serve(spec, started, cancel).await;
    }
}
