//! Added latency of the whole completion path — gateway (REST, auth) → chat-service (gRPC,
//! question and reply stored in SQLite) → a fast local fake upstream — against calling that
//! upstream directly. Time to first content (first answer line; for direct streams the first
//! SSE chunk) and total, p50/p99, at concurrency 1 and 64, streaming and not.
//!
//! `cargo run --release -p docchat-server --example bench_latency [requests_c1] [requests_c64]`
//! Run it alone: the load, docchat and the upstream share the machine's cores.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)] // a benchmark binary (its tasks end with the run)

mod support;

use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::{Value, json};
use support::{Measured, Sample, load, start_upstream};

const ADMIN_KEY: &str = "sk-bench-admin-key-0123456789";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A direct call to the upstream, streamed (as chat-service calls it) or not.
async fn direct(http: Client, url: String, stream: bool) -> Result<Sample, String> {
    let start = Instant::now();
    let mut response = http
        .post(&url)
        .json(&json!({"model": "fake", "messages": [{"role": "user", "content": "hello"}], "stream": stream, "max_tokens": 64}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("upstream {}", response.status()));
    }
    let mut first = None;
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if first.is_none() && !chunk.is_empty() {
            first = Some(ms(start));
        }
    }
    let total = ms(start);
    Ok(Sample {
        first: first.unwrap_or(total),
        total,
    })
}

/// One completion through docchat's REST API. Streamed, "first" is the first answer text
/// line (not the question id line, which comes before the model is called).
async fn through(http: Client, url: String, key: String, stream: bool) -> Result<Sample, String> {
    let start = Instant::now();
    let mut response = http
        .post(&url)
        .bearer_auth(&key)
        .json(&json!({"message": "hello", "stream": stream, "llm_args": {"max_new_tokens": 64}}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        let status = response.status();
        return Err(format!(
            "docchat {status}: {}",
            response.text().await.unwrap_or_default()
        ));
    }
    let mut first = None;
    let mut buffer = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        buffer.extend_from_slice(&chunk);
        if first.is_none() && stream {
            for line in buffer.split(|b| *b == b'\n') {
                if let Ok(v) = serde_json::from_slice::<Value>(line)
                    && v["body"].as_str().is_some_and(|b| !b.is_empty())
                {
                    first = Some(ms(start));
                    break;
                }
            }
        }
    }
    let total = ms(start);
    if stream && !buffer.windows(15).any(|w| w == b"\"finished\":true") {
        return Err(format!(
            "unfinished stream: {}",
            String::from_utf8_lossy(&buffer)
        ));
    }
    Ok(Sample {
        first: first.unwrap_or(total),
        total,
    })
}

fn row(path: &str, stream: bool, concurrency: usize, m: &Measured) {
    println!(
        "| {path:<8} | {:<9} | {concurrency:>3} | {:>7.0} | {:>7.3} | {:>7.3} | {:>7.3} | {:>7.3} | {:>4} |",
        if stream { "streaming" } else { "plain" },
        m.rps(),
        m.p("first", 0.5),
        m.p("first", 0.99),
        m.p("total", 0.5),
        m.p("total", 0.99),
        m.errors
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n1 = args.first().copied().unwrap_or(1000);
    let n64 = args.get(1).copied().unwrap_or(4000);

    let upstream = start_upstream(1, Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.toml");
    std::fs::write(
        &models,
        format!("[[models]]\nname = \"fake\"\nprovider = \"openai\"\nbase_url = \"{upstream}/v1\"\ncontext_length = 8192\ndefault = true\n"),
    )
    .unwrap();
    let mut config = docchat_common::Config::for_test(dir.path().join("data"));
    config.models_file = Some(models);
    config.bootstrap_admin_key = Some(secrecy::SecretString::from(ADMIN_KEY));
    config.log_format = "text".into();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let app = tokio::spawn(docchat_server::standalone::run(
        config,
        listener,
        shutdown.clone(),
    ));

    let http = Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(http.get(format!("{base}/rpc/health/readiness")).bearer_auth(ADMIN_KEY).send().await, Ok(r) if r.status() == 200)
    {
        assert!(Instant::now() < deadline, "docchat did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let user: Value = http
        .post(format!("{base}/api/v1/admin/users"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"username": "bench", "email": "bench@example.com"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key: Value = http
        .post(format!("{base}/api/v1/admin/api_keys"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"user_id": user["id"], "name": "bench"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = key["secret_key"].as_str().unwrap().to_owned();
    let chat: Value = http
        .post(format!("{base}/api/v1/chats"))
        .bearer_auth(&key)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let completions = format!(
        "{base}/api/v1/chats/{}/completions",
        chat["id"].as_str().unwrap()
    );
    let upstream_url = format!("{upstream}/v1/chat/completions");

    println!(
        "fake upstream: {} words per answer, no delay; docchat standalone on SQLite",
        support::WORDS
    );
    println!(
        "| path     | mode      |   c |   req/s | first p50 ms | first p99 | total p50 | total p99 | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut added = Vec::new();
    for stream in [false, true] {
        for (concurrency, n) in [(1, n1), (64, n64)] {
            let (h, u) = (http.clone(), upstream_url.clone());
            let d = load(concurrency, n, 50, move || {
                direct(h.clone(), u.clone(), true)
            })
            .await;
            row("direct", stream, concurrency, &d);
            let (h, u, k) = (http.clone(), completions.clone(), key.clone());
            let t = load(concurrency, n, 50, move || {
                through(h.clone(), u.clone(), k.clone(), stream)
            })
            .await;
            row("docchat", stream, concurrency, &t);
            added.push((
                stream,
                concurrency,
                t.p("first", 0.5) - d.p("first", 0.5),
                t.p("total", 0.5) - d.p("total", 0.5),
            ));
        }
    }
    println!();
    println!("added by docchat at p50 (ms):");
    for (stream, c, first, total) in added {
        println!(
            "  {:<9} c={c:<3} first {first:.3}  total {total:.3}",
            if stream { "streaming" } else { "plain" }
        );
    }
    println!(
        "peak RSS of the whole process (docchat + load + upstream): {:.0} MB",
        support::peak_rss_mb()
    );
    shutdown.cancel();
    let _ = app.await;
}
