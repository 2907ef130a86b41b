//! The gateway's HTTP metrics and request spans: requests by route template, method and status, their
//! latency, and how many are in flight. Recorded by [`record`], the outermost middleware, so
//! every answer counts, refusals at the edge included; served with every other family on the
//! probe listener's `/metrics` (never on the public port).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use docchat_common::metrics::{LATENCY_BUCKETS, counter_vec, gauge, histogram_vec};
use prometheus::{HistogramVec, IntCounterVec, IntGauge};
use tracing::Instrument;

static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "docchat_http_requests_total",
        "REST requests answered, by route template, method and status.",
        &["route", "method", "status"],
    )
});
static SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "docchat_http_request_duration_seconds",
        "REST latency to the response head (a stream's body continues after it), by route \
         template and method.",
        &["route", "method"],
        LATENCY_BUCKETS,
    )
});
static IN_FLIGHT: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "docchat_http_requests_in_flight",
        "REST requests received whose response head is not sent yet.",
    )
});

/// Forces the families so a scrape shows them before the first request.
pub fn touch() {
    LazyLock::force(&REQUESTS);
    LazyLock::force(&SECONDS);
    LazyLock::force(&IN_FLIGHT);
}

/// A method as a label: the standard ones, else `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The middleware: counts and times every request under its route template (`unmatched`
/// for paths no route has, so a scan of random URLs adds no series), inside a server span
/// that continues the caller's trace (`traceparent`) and that every gRPC call it makes
/// carries on. The template is read once the router has matched (a lookup along the matched
/// resource's path; before routing it would be a walk of every route's pattern).
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let start = Instant::now();
    let method = method_label(req.method());
    let span = tracing::info_span!(
        "http",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        http.request.method = method,
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    );
    if !span.is_disabled()
        && let Some(parent) = req
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
    {
        let mut carrier = HashMap::from([("traceparent".to_owned(), parent.to_owned())]);
        if let Some(state) = req
            .headers()
            .get("tracestate")
            .and_then(|v| v.to_str().ok())
        {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        docchat_common::telemetry::set_parent_from_map(&span, &carrier);
    }
    let _in_flight = docchat_common::metrics::hold(&IN_FLIGHT);
    let result = next
        .call(req)
        .instrument(span.clone())
        .await
        .map(ServiceResponse::map_into_boxed_body);
    let (status, route) = match &result {
        Ok(response) => (
            response.status(),
            response
                .request()
                .match_pattern()
                .unwrap_or_else(|| "unmatched".to_owned()),
        ),
        Err(e) => (e.as_response_error().status_code(), "unmatched".to_owned()),
    };
    if !span.is_disabled() {
        span.record("otel.name", format!("{method} {route}"));
        span.record("http.route", route.as_str());
        span.record("http.response.status_code", status.as_u16());
    }
    REQUESTS
        .with_label_values(&[route.as_str(), method, status.as_str()])
        .inc();
    SECONDS
        .with_label_values(&[route.as_str(), method])
        .observe(start.elapsed().as_secs_f64());
    result
}
