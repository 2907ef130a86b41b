//! Logs and traces: `tracing` everywhere, exported over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; W3C trace context carried in gRPC metadata and bus
//! envelopes.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Flushes pending spans when dropped; keep it alive in `main`.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "flushing traces failed");
        }
    }
}

/// Installs the global subscriber: text or JSON log lines on stderr filtered by `RUST_LOG`
/// (default `info`) and, when an OTLP endpoint is configured, the OpenTelemetry layer
/// filtered by `trace_filter` (`DOCCHAT_TRACE_FILTER`, `EnvFilter` directives): each layer has
/// its own filter, so `RUST_LOG=warn` quiets the logs and keeps the traces, and a span neither
/// wants is never created.
#[expect(
    clippy::disallowed_methods,
    reason = "OpenTelemetry's own variables (OTEL_*) configure the exporter"
)]
pub fn init(
    service_name: &str,
    log_format: &str,
    trace_filter: &str,
) -> anyhow::Result<TelemetryGuard> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let logs = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let provider = if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service_name.to_owned())
            .build();
        Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build(),
        )
    } else {
        None
    };
    let traces = match provider {
        Some(ref p) => Some((
            p.tracer(service_name.to_owned()),
            EnvFilter::try_new(trace_filter)
                .map_err(|e| anyhow::anyhow!("DOCCHAT_TRACE_FILTER: {e}"))?,
        )),
        None => None,
    };
    subscriber(logs, log_format, std::io::stderr, traces).try_init()?;
    Ok(TelemetryGuard { provider })
}

/// The subscriber `init` installs: the log layer and the optional trace layer, each behind
/// its own filter.
fn subscriber<W>(
    logs: EnvFilter,
    log_format: &str,
    writer: W,
    traces: Option<(SdkTracer, EnvFilter)>,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = if log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer().with_writer(writer).boxed()
    };
    let otel = traces.map(|(tracer, filter)| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(filter)
    });
    tracing_subscriber::registry()
        .with(fmt.with_filter(logs))
        .with(otel)
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(k, v);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            http::header::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// Writes the current span's context into an outgoing HTTP request's headers (a model
/// upstream's, so its own traces join docchat's).
pub fn inject_http(headers: &mut http::HeaderMap) {
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
}

/// Writes the current span's context into outgoing gRPC metadata.
pub fn inject_grpc(metadata: &mut tonic::metadata::MetadataMap) {
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(metadata));
}

/// A server span for an incoming gRPC request, parented to the caller's trace.
pub fn grpc_server_span(request: &http::Request<()>) -> tracing::Span {
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(request.headers()));
    let span = tracing::info_span!("grpc", path = %request.uri().path());
    let _ = span.set_parent(parent);
    span
}

/// The current trace context as a map, for bus envelopes.
pub fn current_context_map() -> HashMap<String, String> {
    let mut map = HashMap::new();
    TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut map);
    map
}

/// Parents `span` to the context carried by an envelope.
pub fn set_parent_from_map(span: &tracing::Span, map: &HashMap<String, String>) {
    let parent = TraceContextPropagator::new().extract(map);
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};

    use super::*;

    /// The names of the spans exported.
    #[derive(Debug, Clone, Default)]
    struct Exported(Arc<Mutex<Vec<String>>>);

    impl SpanExporter for Exported {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let mut names = self.0.lock().unwrap();
            names.extend(batch.into_iter().map(|s| s.name.into_owned()));
            Ok(())
        }
    }

    /// The log lines written.
    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One request's worth of telemetry under the two filters (`traces` None: no OTLP):
    /// the spans exported, the log text, and whether the request's span existed at all.
    fn request(logs: &str, traces: Option<&str>) -> (Vec<String>, String, bool) {
        let exported = Exported::default();
        let written = Written::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exported.clone())
            .build();
        let traces = traces.map(|f| (provider.tracer("test"), EnvFilter::new(f)));
        let writer = written.clone();
        let subscriber = subscriber(EnvFilter::new(logs), "text", move || writer.clone(), traces);
        let created = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", route = "/api/v1/chats");
            let created = !span.is_disabled();
            let _entered = span.enter();
            tracing::debug!("debug detail");
            tracing::info!("info detail");
            tracing::warn!("something to look at");
            created
        });
        provider.force_flush().unwrap();
        let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        let names = exported.0.lock().unwrap().clone();
        (names, text, created)
    }

    #[test]
    fn quiet_logs_keep_the_traces() {
        let (spans, logs, _) = request("warn", Some("info"));
        assert_eq!(
            spans,
            ["request"],
            "the info span is exported under RUST_LOG=warn"
        );
        assert!(logs.contains("something to look at"), "{logs}");
        assert!(
            !logs.contains("info detail"),
            "RUST_LOG=warn writes no info line: {logs}"
        );
    }

    #[test]
    fn the_trace_filter_leaves_the_logs_alone() {
        let (spans, logs, _) = request("info", Some("warn"));
        assert!(
            spans.is_empty(),
            "an info span under a warn trace filter: {spans:?}"
        );
        assert!(
            logs.contains("info detail") && logs.contains("request"),
            "{logs}"
        );
        assert!(!logs.contains("debug detail"), "{logs}");
    }

    #[test]
    fn a_span_no_layer_wants_is_never_created() {
        // The hot path's cost: without OTLP and with warn logs, the request span is not made.
        let (_, logs, created) = request("warn", None);
        assert!(!created, "the span was created though nothing records it");
        assert!(logs.contains("something to look at"), "{logs}");
        let (_, _, created) = request("warn", Some("info"));
        assert!(created);
        let (_, _, created) = request("info", None);
        assert!(created);
    }
}
