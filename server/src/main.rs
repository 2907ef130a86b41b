//! The gateway binary.
//!
//! - `gateway --standalone`: every service in this process (the README's run command).
//! - `gateway`: the REST gateway alone, services at `DOCCHAT_*_URL`.
//! - `gateway healthcheck`: exit 0 when the probe listener says ready.
//! - `gateway mcp --url <docchat URL> [--key <API key>]`: MCP on stdin/stdout, forwarded to
//!   that docchat's `/mcp` (for desktop assistants; the key may come from
//!   `DOCCHAT_API_KEY`).

use std::process::ExitCode;
use std::sync::Arc;

use docchat_common::JwtKeys;
use docchat_common::config::Config;
use docchat_server::mcp_stdio;
use tokio_util::sync::CancellationToken;

#[tokio::main]
#[allow(clippy::print_stderr)] // before telemetry exists, stderr is the only channel
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Before configuration and telemetry: stdout carries MCP alone.
    if args.first().map(String::as_str) == Some("mcp") {
        return mcp(&args[1..]).await;
    }
    let config = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid configuration: {e:#}");
            return ExitCode::from(2);
        }
    };
    let _telemetry = match docchat_common::telemetry::init(
        "gateway",
        &config.log_format,
        &config.trace_filter,
    ) {
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

#[allow(clippy::print_stderr)] // stdout carries MCP; stderr is the only other channel
async fn mcp(args: &[String]) -> ExitCode {
    #[expect(
        clippy::disallowed_methods,
        reason = "the bridge's key comes from its own variable, not docchat's configuration"
    )]
    let env_key = std::env::var(mcp_stdio::KEY_VARIABLE).ok();
    let result = match mcp_stdio::Options::parse(args, env_key) {
        Ok(options) => mcp_stdio::run(options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docchat mcp: {e:#}");
            ExitCode::from(2)
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
