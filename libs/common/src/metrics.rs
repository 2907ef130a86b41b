//! Prometheus metrics: one process-wide registry (the `prometheus` crate's default one, with
//! its process collector), the families every service shares (gRPC on both sides, the bus,
//! the outbox, model upstreams), the probe listener that serves them, and the helpers each
//! crate's own `metrics.rs` declares its families with.
//!
//! Names follow Prometheus' conventions: a `docchat_` prefix (the gRPC families keep the
//! names of go-grpc-prometheus, which dashboards already know), base units (`_seconds`,
//! `_bytes`) and `_total` on counters. Labels take values from a closed set only: route
//! templates, proto method names, registry model names, fixed outcomes; never an id, a path
//! or a user's text. In standalone mode every service records into the same registry and the
//! gateway's probe listener serves it once.

use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus::{
    CounterVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts,
};
use tokio_util::sync::CancellationToken;

/// Request latencies inside docchat: a millisecond to a minute.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Work measured in seconds to minutes: model calls, generations, ingestion stages, agent
/// runs.
pub const SLOW_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 900.0,
];

fn register<C: prometheus::core::Collector + Clone + 'static>(collector: C) -> C {
    if let Err(e) = prometheus::default_registry().register(Box::new(collector.clone())) {
        tracing::error!(error = %e, "metric family not registered");
    }
    collector
}

/// A counter family. Names and labels are constants of the program, checked by the tests
/// that render every family, so an invalid one is a bug, not a runtime condition.
#[expect(
    clippy::expect_used,
    reason = "constant names and labels; every family is rendered by the tests"
)]
pub fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter family"))
}

/// A counter without labels.
#[expect(
    clippy::expect_used,
    reason = "constant names; every family is rendered by the tests"
)]
pub fn counter(name: &str, help: &str) -> IntCounter {
    register(IntCounter::new(name, help).expect("valid counter"))
}

/// A counter family of fractional amounts (costs).
#[expect(
    clippy::expect_used,
    reason = "constant names and labels; every family is rendered by the tests"
)]
pub fn float_counter_vec(name: &str, help: &str, labels: &[&str]) -> CounterVec {
    register(CounterVec::new(Opts::new(name, help), labels).expect("valid counter family"))
}

/// A gauge family.
#[expect(
    clippy::expect_used,
    reason = "constant names and labels; every family is rendered by the tests"
)]
pub fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge family"))
}

/// A gauge without labels.
#[expect(
    clippy::expect_used,
    reason = "constant names; every family is rendered by the tests"
)]
pub fn gauge(name: &str, help: &str) -> IntGauge {
    register(IntGauge::new(name, help).expect("valid gauge"))
}

/// A histogram family with `buckets` (upper bounds, in the family's unit).
#[expect(
    clippy::expect_used,
    reason = "constant names and labels; every family is rendered by the tests"
)]
pub fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    register(
        HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            labels,
        )
        .expect("valid histogram family"),
    )
}

/// A histogram without labels.
#[expect(
    clippy::expect_used,
    reason = "constant names; every family is rendered by the tests"
)]
pub fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    register(
        Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
            .expect("valid histogram"),
    )
}

/// One unit of a gauge for as long as it lives (a request in flight, a generation or a job
/// running): however the work ends, a drop included, the gauge goes back down.
pub struct Held(IntGauge);

/// Counts one in `gauge` until the returned guard is dropped.
pub fn hold(gauge: &IntGauge) -> Held {
    gauge.inc();
    Held(gauge.clone())
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Every registered family in Prometheus' text exposition format.
pub fn render() -> String {
    // Families declared in statics register on first use: the shared ones are forced once
    // so a scrape shows them (at zero) before any traffic; then the readings.
    static SHARED: std::sync::Once = std::sync::Once::new();
    SHARED.call_once(touch);
    for (_, reading) in READINGS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        reading();
    }
    let encoder = prometheus::TextEncoder::new();
    match encoder.encode_to_string(&prometheus::gather()) {
        Ok(text) => text,
        Err(e) => {
            tracing::error!(error = %e, "rendering metrics failed");
            String::new()
        }
    }
}

/// The sum of `name`'s series whose labels include `labels`, in this process's registry: a
/// counter's or a gauge's value, a histogram's count of observations. For tests, which run
/// each in a process of its own (nextest), so the sum is what that test did.
pub fn sample(name: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus::proto::MetricType;
    prometheus::gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| {
            let kind = family.get_field_type();
            family.get_metric().iter().map(move |m| (kind, m))
        })
        .filter(|(_, m)| {
            labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })
        .map(|(kind, m)| match kind {
            MetricType::COUNTER => m.get_counter().get_value(),
            MetricType::GAUGE => m.get_gauge().get_value(),
            MetricType::HISTOGRAM => m.get_histogram().get_sample_count() as f64,
            _ => 0.0,
        })
        .sum()
}

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The crates' `metrics::touch` functions already run.
static TOUCHED: std::sync::Mutex<Vec<fn()>> = std::sync::Mutex::new(Vec::new());

/// Runs `touch` (a crate's function that forces its statics, their closed label sets at
/// zero) once per process, from the crate's `serve`: its families show in every scrape
/// from then on, before their first sample. Registered series stay, so once is enough.
pub fn declare(touch: fn()) {
    let mut done = TOUCHED.lock().unwrap_or_else(|p| p.into_inner());
    if !done.iter().any(|f| std::ptr::fn_addr_eq(*f, touch)) {
        done.push(touch);
        touch();
    }
}

/// A reading taken before every scrape (a gauge of something only its owner can see, such
/// as the sandbox's slots).
pub type Reading = Box<dyn Fn() + Send + Sync>;

static READINGS: std::sync::Mutex<Vec<(&'static str, Reading)>> = std::sync::Mutex::new(Vec::new());

/// Runs `reading` before every scrape; a second one under the same `key` replaces the first
/// (a service started again in the same process, as tests do).
pub fn before_render(key: &'static str, reading: Reading) {
    let mut list = READINGS.lock().unwrap_or_else(|p| p.into_inner());
    list.retain(|(k, _)| *k != key);
    list.push((key, reading));
}

fn touch() {
    LazyLock::force(&GRPC_SERVER_HANDLED);
    LazyLock::force(&GRPC_SERVER_SECONDS);
    LazyLock::force(&GRPC_CLIENT_HANDLED);
    LazyLock::force(&GRPC_CLIENT_SECONDS);
    LazyLock::force(&BUS_PUBLISHED);
    LazyLock::force(&BUS_DELIVERED);
    LazyLock::force(&BUS_REDELIVERED);
    LazyLock::force(&BUS_DEAD_LETTERED);
    LazyLock::force(&OUTBOX_BACKLOG);
    LazyLock::force(&OUTBOX_OLDEST_AGE);
    LazyLock::force(&OUTBOX_RELAYED);
    LazyLock::force(&MODEL_REQUESTS);
    for limit in [
        "chat_rate_limit",
        "chat_max_concurrent_per_user",
        "llm_cost_cap",
        "mcp_rate_limit",
        "mcp_max_concurrent_jobs",
    ] {
        REFUSALS.with_label_values(&[limit]);
    }
    LazyLock::force(&LLM_TOKENS);
    LazyLock::force(&LLM_COST);
    LazyLock::force(&MODEL_SECONDS);
}

// --- the bus and the outbox ---

/// Events published, by event type.
pub static BUS_PUBLISHED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_bus_published_total",
        "Events published to the bus, by event type.",
        &["event"],
    )
});
/// Events handed to a handler, by event type and outcome (`ok`, `error`).
pub static BUS_DELIVERED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_bus_delivered_total",
        "Events handed to a consumer's handler, by event type and outcome (ok, error).",
        &["event", "outcome"],
    )
});
/// Events requeued after a failed handler.
pub static BUS_REDELIVERED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_bus_redelivered_total",
        "Events requeued for another attempt after their handler failed, by event type.",
        &["event"],
    )
});
/// Events given up on after their last attempt.
pub static BUS_DEAD_LETTERED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_bus_dead_lettered_total",
        "Events moved to a dead-letter queue after their last failed attempt, by event type.",
        &["event"],
    )
});
/// Outbox rows not yet published, per service's outbox.
pub static OUTBOX_BACKLOG: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "docchat_outbox_backlog_events",
        "Events written to a service's outbox and not yet published (read after each relay pass).",
        &["service"],
    )
});
/// Age of the oldest unpublished outbox row.
pub static OUTBOX_OLDEST_AGE: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "docchat_outbox_oldest_event_age_seconds",
        "Age of the oldest event still in a service's outbox (0 when it is empty).",
        &["service"],
    )
});
/// Outbox rows published.
pub static OUTBOX_RELAYED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_outbox_relayed_total",
        "Outbox events published to the bus, per service.",
        &["service"],
    )
});

/// Counts a bus delivery's outcome. `attempts_left` false: the event is dead-lettered.
pub fn bus_delivery(event: &str, result: &anyhow::Result<()>, redelivered: bool) {
    let event = event_label(event);
    match result {
        Ok(()) => BUS_DELIVERED.with_label_values(&[event, "ok"]).inc(),
        Err(_) => {
            BUS_DELIVERED.with_label_values(&[event, "error"]).inc();
            if redelivered {
                BUS_REDELIVERED.with_label_values(&[event]).inc();
            } else {
                BUS_DEAD_LETTERED.with_label_values(&[event]).inc();
            }
        }
    }
}

/// An event type as a label: docchat's own types are a closed set of dotted words; anything
/// else (a foreign publisher on a shared broker) is `other`.
pub fn event_label(event: &str) -> &str {
    let ok = !event.is_empty()
        && event.len() <= 64
        && event
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_');
    if ok { event } else { "other" }
}

// --- limits ---

/// Requests refused by a limit, by which one.
pub static REFUSALS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_limit_refusals_total",
        "Requests refused (429) by a limit: chat_rate_limit, chat_max_concurrent_per_user, \
         llm_cost_cap, mcp_rate_limit, mcp_max_concurrent_jobs.",
        &["limit"],
    )
});

/// Counts one refusal by `limit` (one of the names [`REFUSALS`] lists).
pub fn refused(limit: &'static str) {
    REFUSALS.with_label_values(&[limit]).inc();
}

// --- model usage, as booked ---

/// Tokens booked, by registry model name and direction (`prompt`, `completion`).
pub static LLM_TOKENS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_llm_tokens_total",
        "Model tokens booked to users' usage, by registry model name and direction (prompt, \
         completion).",
        &["model", "direction"],
    )
});
/// Cost booked, in the models file's price unit.
pub static LLM_COST: LazyLock<CounterVec> = LazyLock::new(|| {
    float_counter_vec(
        "docchat_llm_cost_total",
        "Model cost booked to users' usage, in the models file's price unit (per million \
         tokens), by registry model name.",
        &["model"],
    )
});

/// Counts a booking (a `usage.llm` event as it is made, once).
pub fn llm_usage(usage: &docchat_proto::events::v1::LlmUsage) {
    LLM_TOKENS
        .with_label_values(&[usage.model.as_str(), "prompt"])
        .inc_by(usage.prompt_tokens);
    LLM_TOKENS
        .with_label_values(&[usage.model.as_str(), "completion"])
        .inc_by(usage.completion_tokens);
    // A free model's series exists too, at 0 (a dashboard lists every model in use).
    let cost = if usage.cost.is_finite() {
        usage.cost.max(0.0)
    } else {
        0.0
    };
    LLM_COST
        .with_label_values(&[usage.model.as_str()])
        .inc_by(cost);
}

// --- model upstreams ---

/// Requests to model upstreams, by registry model name, kind and outcome.
pub static MODEL_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_model_requests_total",
        "Requests to model upstreams, by registry model name, kind (chat, embed, rerank, \
         transcribe) and outcome (ok, error).",
        &["model", "kind", "outcome"],
    )
});
/// Latency of model upstream requests, to the end of the answer.
pub static MODEL_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_model_request_duration_seconds",
        "Model upstream request latency to the end of the answer (streams included), by \
         registry model name and kind.",
        &["model", "kind"],
        SLOW_BUCKETS,
    )
});

/// Records one model upstream request.
pub fn model_request(model: &str, kind: &str, ok: bool, elapsed: Duration) {
    MODEL_REQUESTS
        .with_label_values(&[model, kind, if ok { "ok" } else { "error" }])
        .inc();
    MODEL_SECONDS
        .with_label_values(&[model, kind])
        .observe(elapsed.as_secs_f64());
}

// --- gRPC, server and client side ---

static GRPC_SERVER_HANDLED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "grpc_server_handled_total",
        "gRPC calls completed by this server, by service, method and status code.",
        &["grpc_service", "grpc_method", "grpc_code"],
    )
});
static GRPC_SERVER_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "grpc_server_handling_seconds",
        "gRPC server handling time to the call's end (a stream's last message), by service and \
         method.",
        &["grpc_service", "grpc_method"],
        LATENCY_BUCKETS,
    )
});
static GRPC_CLIENT_HANDLED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "grpc_client_handled_total",
        "gRPC calls this process made to other docchat services, by service, method and status \
         code.",
        &["grpc_service", "grpc_method", "grpc_code"],
    )
});
static GRPC_CLIENT_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "grpc_client_handling_seconds",
        "gRPC client time to the call's end (a stream's last message), by service and method.",
        &["grpc_service", "grpc_method"],
        LATENCY_BUCKETS,
    )
});

#[derive(Clone, Copy, Debug)]
enum Side {
    Server,
    Client,
}

/// A tower layer counting and timing gRPC calls: on a tonic server
/// ([`crate::grpc::server`]) and on every client channel ([`crate::clients`]).
#[derive(Clone, Copy, Debug)]
pub struct GrpcMetricsLayer {
    side: Side,
}

impl GrpcMetricsLayer {
    pub fn server() -> Self {
        GrpcMetricsLayer { side: Side::Server }
    }

    pub fn client() -> Self {
        GrpcMetricsLayer { side: Side::Client }
    }
}

impl<S> tower_layer::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> GrpcMetrics<S> {
        GrpcMetrics {
            inner,
            side: self.side,
        }
    }
}

/// The service [`GrpcMetricsLayer`] makes.
#[derive(Clone, Debug)]
pub struct GrpcMetrics<S> {
    inner: S,
    side: Side,
}

impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for GrpcMetrics<S>
where
    S: tower_service::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: http_body::Body,
{
    type Response = http::Response<MeteredBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let call = Call {
            side: self.side,
            // Shares the request's bytes (no copy per call).
            path: request.uri().path_and_query().cloned(),
            start: Instant::now(),
            code: None,
        };
        let future = self.inner.call(request);
        Box::pin(async move {
            match future.await {
                Ok(response) => {
                    let mut call = call;
                    // Trailers-only answers (errors, mostly) carry the status in the headers.
                    call.code = grpc_status(response.headers());
                    Ok(response.map(|inner| MeteredBody {
                        inner,
                        call: Some(call),
                    }))
                }
                Err(e) => {
                    let mut call = call;
                    call.code = Some(tonic::Code::Unavailable);
                    call.finish();
                    Err(e)
                }
            }
        })
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<tonic::Code> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from)
}

/// One call in flight: recorded once, when its body ends, fails or is dropped.
struct Call {
    side: Side,
    path: Option<http::uri::PathAndQuery>,
    start: Instant,
    code: Option<tonic::Code>,
}

impl Call {
    fn finish(&self) {
        // A body dropped before its status (a client that went away) was cancelled.
        let code = self.code.unwrap_or(tonic::Code::Cancelled);
        // `/package.Service/Method`; a path no route knows is answered Unimplemented and is
        // not worth a label of its own.
        let path = self.path.as_ref().map_or("", |p| p.path());
        let (service, method) = match path.trim_start_matches('/').split_once('/') {
            Some((s, m)) if code != tonic::Code::Unimplemented && !s.is_empty() => (s, m),
            _ => ("unknown", "unknown"),
        };
        let code = code_label(code);
        let (handled, seconds) = match self.side {
            Side::Server => (&GRPC_SERVER_HANDLED, &GRPC_SERVER_SECONDS),
            Side::Client => (&GRPC_CLIENT_HANDLED, &GRPC_CLIENT_SECONDS),
        };
        handled.with_label_values(&[service, method, code]).inc();
        seconds
            .with_label_values(&[service, method])
            .observe(self.start.elapsed().as_secs_f64());
    }
}

/// gRPC's own names for its codes (as go-grpc-prometheus labels them).
fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

pin_project_lite::pin_project! {
    /// A gRPC response body that records its call when the status arrives (the trailers),
    /// the body fails, or it is dropped unfinished.
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
    }

    impl<B> PinnedDrop for MeteredBody<B> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(call) = this.project().call.take() {
                call.finish();
            }
        }
    }
}

impl<B: http_body::Body> http_body::Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref()
                    && let Some(call) = this.call.as_mut()
                {
                    call.code = grpc_status(trailers).or(call.code);
                    if let Some(call) = this.call.take() {
                        call.finish();
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => {
                if let Some(mut call) = this.call.take() {
                    call.code = Some(call.code.unwrap_or(tonic::Code::Unknown));
                    call.finish();
                }
            }
            Poll::Ready(None) => {
                if let Some(mut call) = this.call.take() {
                    // Ended without trailers: only a trailers-only answer does that.
                    call.code = Some(call.code.unwrap_or(tonic::Code::Unknown));
                    call.finish();
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

// --- the probe listener of a service binary ---

/// Serves `/livez`, `/readyz` (`ready` answers) and `/metrics` on `listener` until
/// `shutdown`: a service binary's probe listener (`DOCCHAT_PROBE_ADDR`). Never the public
/// port: nothing here checks a key.
pub async fn serve_probe<R, RF>(
    listener: tokio::net::TcpListener,
    ready: R,
    shutdown: CancellationToken,
) -> anyhow::Result<()>
where
    R: Fn() -> RF + Clone + Send + Sync + 'static,
    RF: Future<Output = bool> + Send + 'static,
{
    use axum::http::{StatusCode, header};
    use axum::routing::get;
    let router = axum::Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready().await {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(|| async { ([(header::CONTENT_TYPE, CONTENT_TYPE)], render()) }),
        );
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_labels_stay_in_a_closed_set() {
        assert_eq!(event_label("ingest.work.default"), "ingest.work.default");
        assert_eq!(event_label("Evil/../x"), "other");
        assert_eq!(event_label(&"a".repeat(65)), "other");
        assert_eq!(event_label(""), "other");
    }

    #[test]
    fn rendering_shows_the_shared_families() {
        model_request("m", "chat", true, Duration::from_millis(5));
        BUS_PUBLISHED.with_label_values(&["x.y"]).inc();
        OUTBOX_BACKLOG.with_label_values(&["chat"]).set(3);
        let text = render();
        for line in [
            "# TYPE docchat_model_requests_total counter",
            r#"docchat_model_requests_total{kind="chat",model="m",outcome="ok"} 1"#,
            r#"docchat_model_request_duration_seconds_bucket{kind="chat",model="m",le="0.01"} 1"#,
            r#"docchat_bus_published_total{event="x.y"} 1"#,
            r#"docchat_outbox_backlog_events{service="chat"} 3"#,
            // the process collector
            "process_resident_memory_bytes",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
