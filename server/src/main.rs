//! The gateway binary.
//!
//! - `gateway --standalone`: every service in this process (the README's run command).
//! - `gateway`: the REST gateway alone, services at `DOCCHAT_*_URL`.
//! - `gateway healthcheck`: exit 0 when the probe listener says ready.

use std::process::ExitCode;
use std::sync::Arc;

use docchat_common::JwtKeys;
use docchat_common::config::Config;
use tokio_util::sync::CancellationToken;

#[tokio::main]
#[allow(clippy::print_stderr)] // before telemetry exists, stderr is the only channel
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid configuration: {e:#}");
            return ExitCode::from(2);
        }
    };
    let _telemetry = match docchat_common::telemetry::init("gateway", &config.log_format) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("cannot start telemetry: {e:#}");
            return ExitCode::from(2);
        }
    };
    // A standalone docchat without an embedder would fail every ingestion: refuse to start,
    // naming the command that fetches it (the README's run command, scripts/run.sh, does).
    if args == ["--standalone"]
        && let Err(e) = docchat_ingest_service::require_embedder(&config)
    {
        eprintln!("docchat cannot start: {e:#}");
        return ExitCode::from(2);
    }
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["--standalone"] => run(config, true).await,
        [] => run(config, false).await,
        ["healthcheck"] => docchat_gateway::healthcheck(&config).await,
        other => Err(anyhow::anyhow!(
            "unknown arguments {other:?}: use --standalone, healthcheck or nothing"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "gateway failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config, standalone: bool) -> anyhow::Result<()> {
    let http = std::net::TcpListener::bind(&config.http_addr)?;
    http.set_nonblocking(true)?;
    let shutdown = CancellationToken::new();
    docchat_common::grpc::cancel_on_signal(shutdown.clone());
    if standalone {
        docchat_server::standalone::run(config, http, shutdown).await
    } else {
        let keys = Arc::new(JwtKeys::from_config(&config)?);
        tracing::info!(addr = %config.http_addr, "serving rest");
        docchat_gateway::serve_http(Arc::new(config), keys, http, shutdown).await
    }
}
