//! docchat's REST gateway: Bearer auth, every route of SPEC.md, the OpenAPI description and
//! Swagger UI. The `gateway` binary (the top-level `server` crate) serves it, alone or with
//! every service in its process (`--standalone`).

pub mod auth;
pub mod error;
pub mod form;
pub mod mcp;
pub mod mcp_limits;
pub mod metrics;
pub mod nul;
pub mod openapi;
pub mod routes;
pub mod state;

use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use docchat_common::JwtKeys;
use docchat_common::config::Config;
use docchat_common::error::{ApiError, ErrorCode};
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;
use utoipa_actix_web::{AppExt, scope};
use utoipa_swagger_ui::SwaggerUi;

use crate::auth::Api;
use crate::error::{HttpError, bad_request};
use crate::state::AppState;

/// Families that exist in SPEC.md but whose endpoints land in later issues: the key is
/// still checked first, then the route answers 404 with the standard body.
async fn authenticated_not_found(req: HttpRequest, _api: Api) -> Result<HttpResponse, HttpError> {
    not_found(req).await
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, HttpError> {
    Err(HttpError(ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    ))))
}

/// A JSON body the extractor refused: 413 over the body limit (declared or read), 400
/// otherwise.
fn json_error(err: actix_web::error::JsonPayloadError) -> HttpError {
    use actix_web::error::{JsonPayloadError, PayloadError};
    match err {
        JsonPayloadError::OverflowKnownLength { limit, .. }
        | JsonPayloadError::Overflow { limit } => HttpError(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than {limit} bytes"),
        )),
        JsonPayloadError::Payload(PayloadError::Overflow) => HttpError(ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the request body is larger than this server accepts",
        )),
        // What the edge refused while the body streamed in (nul.rs).
        JsonPayloadError::Payload(PayloadError::Io(e))
            if e.kind() == std::io::ErrorKind::InvalidData =>
        {
            bad_request(e.to_string())
        }
        other => bad_request(format!("invalid JSON body: {other}")),
    }
}

/// `/api-spec.yaml`, rendered once at start from the registered routes.
struct ApiSpec(String);

async fn api_spec(spec: web::Data<ApiSpec>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/yaml")
        .body(spec.0.clone())
}

/// Registers every route; also used to compute the OpenAPI document.
fn app(
    state: web::Data<AppState>,
) -> (
    App<
        impl actix_web::dev::ServiceFactory<
            actix_web::dev::ServiceRequest,
            Config = (),
            Response = actix_web::dev::ServiceResponse,
            Error = actix_web::Error,
            InitError = (),
        >,
    >,
    utoipa::openapi::OpenApi,
) {
    use routes::{
        agent_files, agent_keys, agents, chats, collections, compat, completions, configuration,
        custom_agents, custom_tools, delete_jobs, documents, extractors, files, health, identity,
        job_history, jobs, mcp, memory_blocks, meta, model_calls, models, rpc_fs, scheduled_tasks,
        tags, uploads, ws,
    };
    let max_body = state.config.max_body_bytes;
    let max_mcp_body = usize::try_from(state.config.mcp_max_body_size_mb.saturating_mul(1_000_000))
        .unwrap_or(usize::MAX);
    let json = web::JsonConfig::default()
        .limit(max_body)
        .error_handler(|err, _| json_error(err).into());
    let query = web::QueryConfig::default()
        .error_handler(|err, _| bad_request(format!("invalid query: {err}")).into());
    let path = web::PathConfig::default()
        .error_handler(|err, _| bad_request(format!("invalid path: {err}")).into());
    let mcp_service = web::Data::new(crate::mcp::service(
        state.config.mcp_write_tools,
        max_mcp_body,
    ));
    let app = App::new()
        .wrap(actix_web::middleware::from_fn(nul::refuse))
        .wrap(actix_web::middleware::from_fn(metrics::record))
        .app_data(state)
        .app_data(mcp_service)
        .app_data(json)
        .app_data(query)
        .app_data(path)
        .into_utoipa_app()
        .openapi(openapi::ApiDoc::openapi())
        .service(
            scope::scope("/api/v1")
                .configure(delete_jobs::configure)
                .configure(collections::configure)
                .configure(documents::configure)
                .configure(uploads::configure)
                .configure(tags::configure)
                .configure(extractors::configure)
                .configure(chats::configure)
                .configure(completions::configure)
                .configure(models::configure)
                .configure(model_calls::configure)
                .configure(identity::configure)
                .configure(configuration::configure)
                .configure(job_history::configure)
                .configure(jobs::configure)
                .configure(agents::configure)
                .configure(agent_files::configure)
                .configure(custom_tools::configure)
                .configure(custom_agents::configure)
                .configure(agent_keys::configure)
                .configure(mcp::configure)
                .configure(memory_blocks::configure)
                .configure(scheduled_tasks::configure)
                .default_service(web::to(authenticated_not_found)),
        )
        .service(scope::scope("/rpc/health").configure(health::configure))
        .service(
            scope::scope("/compat_api/v1")
                // Images travel inline as data URLs: the main API's body limit, not actix's
                // 256 KiB default.
                .app_data(web::PayloadConfig::new(max_body))
                .configure(compat::configure)
                .default_service(web::to(compat::unknown)),
        )
        .service(crate::mcp::endpoint)
        .route("/mcp", web::get().to(crate::mcp::other_methods))
        .route("/mcp", web::delete().to(crate::mcp::other_methods))
        .configure(files::configure)
        .configure(rpc_fs::configure)
        .route("/ws", web::get().to(ws::chat_socket))
        .configure(meta::configure)
        .route("/api-spec.yaml", web::get().to(api_spec))
        .default_service(web::to(not_found));
    let (app, mut api) = app.split_for_parts();
    openapi::complete(&mut api);
    (app, api)
}

/// Serves REST on `listener` until `shutdown`, then for `shutdown_delay_seconds` more with
/// readiness saying not ready, then drains for up to `shutdown_grace_seconds`; also serves
/// the probe listener when `DOCCHAT_PROBE_ADDR` is set.
pub async fn serve_http(
    config: Arc<Config>,
    keys: Arc<JwtKeys>,
    listener: std::net::TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let state = web::Data::new(AppState::new(config.clone(), keys, shutdown.clone())?);
    docchat_common::metrics::declare(metrics::touch);
    let spec = web::Data::new(ApiSpec(
        app(state.clone())
            .1
            .to_yaml()
            .map_err(|e| anyhow::anyhow!("rendering api spec: {e}"))?,
    ));

    let main_state = state.clone();
    let server = HttpServer::new(move || {
        let (app, api) = app(main_state.clone());
        app.app_data(spec.clone())
            .service(SwaggerUi::new("/swagger-ui/{_:.*}").url("/api-spec.json", api))
    })
    // Streamed answers are many small writes: without TCP_NODELAY each waits for the
    // client's delayed ACK (~40 ms).
    .on_connect(|conn, _| {
        if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>()
            && let Err(e) = tcp.set_nodelay(true)
        {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    })
    .listen(listener)?
    .disable_signals()
    .shutdown_timeout(config.shutdown_grace_seconds)
    .run();
    let handle = server.handle();

    let probe = match &config.probe_addr {
        Some(addr) => {
            let probe_state = state.clone();
            let server = HttpServer::new(move || {
                App::new()
                    .app_data(probe_state.clone())
                    .route(
                        "/livez",
                        web::get().to(|| async { HttpResponse::Ok().body("ok") }),
                    )
                    .route(
                        "/readyz",
                        web::get().to(|s: web::Data<AppState>| async move {
                            routes::health::readiness_response(&s).await
                        }),
                    )
                    .route(
                        "/metrics",
                        web::get().to(|| async {
                            HttpResponse::Ok()
                                .content_type(docchat_common::metrics::CONTENT_TYPE)
                                .body(docchat_common::metrics::render())
                        }),
                    )
            })
            .workers(1)
            .bind(addr)?
            .disable_signals()
            .run();
            Some(server)
        }
        None => None,
    };
    let probe_handle = probe.as_ref().map(|p| p.handle());

    let delay = Duration::from_secs(config.shutdown_delay_seconds);
    #[expect(
        clippy::disallowed_methods,
        reason = "owned by this function, which aborts it when the servers end"
    )]
    let stopper = tokio::spawn(async move {
        shutdown.cancelled().await;
        if !delay.is_zero() {
            tracing::info!(
                ?delay,
                "stopping: not ready, still serving until the delay ends"
            );
            tokio::time::sleep(delay).await;
        }
        if let Some(p) = probe_handle {
            p.stop(true).await;
        }
        handle.stop(true).await;
    });
    let result = match probe {
        Some(p) => futures::future::try_join(server, p).await.map(|_| ()),
        None => server.await,
    };
    stopper.abort();
    result?;
    Ok(())
}

/// `gateway healthcheck`: asks the probe listener (or the REST port's liveness) whether
/// the gateway is up.
pub async fn healthcheck(config: &Config) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = config
        .probe_addr
        .clone()
        .ok_or_else(|| anyhow::anyhow!("DOCCHAT_PROBE_ADDR is not set"))?
        .replace("0.0.0.0", "127.0.0.1");
    let mut stream = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&addr),
    )
    .await??;
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut head = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut head)).await??;
    let line = String::from_utf8_lossy(&head[..n]);
    if line.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        anyhow::bail!("gateway not ready: {}", line.lines().next().unwrap_or(""))
    }
}
