//! Logs and traces: `tracing` everywhere, exported over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; W3C trace context carried in gRPC metadata and bus
//! envelopes.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
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

/// Installs the global subscriber: `RUST_LOG` filter (default `info`), text or JSON lines on
/// stderr, and the OpenTelemetry layer when an OTLP endpoint is configured.
#[expect(
    clippy::disallowed_methods,
    reason = "OpenTelemetry's own variables (OTEL_*) configure the exporter"
)]
pub fn init(service_name: &str, log_format: &str) -> anyhow::Result<TelemetryGuard> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = if log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed()
    };

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
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service_name.to_owned())));
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()?;
    Ok(TelemetryGuard { provider })
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
