//! Per-call latency of docchat's MCP server (`/mcp`) against the REST calls a user would
//! make instead, one call at a time (p50/p99 ms), on a standalone docchat (SQLite, the real
//! MiniLM embedder) with a fast local fake model upstream and one ingested document:
//!
//! - `list_collections` (MCP) against `GET /api/v1/collections`: the same gRPC call, so the
//!   difference is what the MCP layer adds (JSON-RPC, rmcp, the JSON answer);
//! - `search` (MCP): the RAG retrieval (embedding the query, hybrid search). REST has no
//!   search endpoint: the nearest REST path that runs it is a RAG completion, next;
//! - `ask` (MCP) against REST's `POST /chats` + `POST /chats/{id}/completions` with the same
//!   question (a new chat session each, as `ask` makes).
//!
//! `cargo run --release -p docchat-server --example bench_mcp [calls]` (default 300).
//! The embedder comes from `DOCCHAT_MODELS_DIR` (default `~/.cache/docchat/models`,
//! what `scripts/fetch-models.sh` fills). Run it alone: everything shares the cores.

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
use support::{ADMIN_KEY, Measured, Sample, load, start_docchat, start_upstream};

const QUESTION: &str = "How many gulls did the lighthouse keeper count?";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// One MCP tool call, as a stateless client sends it (no session, JSON answer).
async fn mcp(
    http: Client,
    base: String,
    key: String,
    tool: &'static str,
    args: Value,
) -> Result<Sample, String> {
    let start = Instant::now();
    let response = http
        .post(format!("{base}/mcp"))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if !status.is_success()
        || body["result"]["isError"] == json!(true)
        || body.get("error").is_some()
    {
        return Err(format!("{tool}: {status} {body}"));
    }
    let total = ms(start);
    Ok(Sample {
        first: total,
        total,
    })
}

async fn rest_collections(http: Client, base: String, key: String) -> Result<Sample, String> {
    let start = Instant::now();
    let r = http
        .get(format!("{base}/api/v1/collections"))
        .bearer_auth(&key)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("collections {}", r.status()));
    }
    r.bytes().await.map_err(|e| e.to_string())?;
    let total = ms(start);
    Ok(Sample {
        first: total,
        total,
    })
}

async fn rest_ask(
    http: Client,
    base: String,
    key: String,
    collection: String,
) -> Result<Sample, String> {
    let start = Instant::now();
    let chat: Value = http
        .post(format!("{base}/api/v1/chats?collection_id={collection}"))
        .bearer_auth(&key)
        .json(&json!({}))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let id = chat["id"].as_str().ok_or("no chat id")?;
    let r = http
        .post(format!("{base}/api/v1/chats/{id}/completions"))
        .bearer_auth(&key)
        .json(&json!({"message": QUESTION, "rag_config": {"rag_type": "rag"}}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("completion {}", r.status()));
    }
    r.bytes().await.map_err(|e| e.to_string())?;
    let total = ms(start);
    Ok(Sample {
        first: total,
        total,
    })
}

fn row(call: &str, path: &str, m: &Measured) {
    println!(
        "| {call:<16} | {path:<34} | {:>7.2} | {:>7.2} | {:>6} |",
        m.p("total", 0.5),
        m.p("total", 0.99),
        m.errors
    );
}

#[tokio::main]
async fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let upstream = start_upstream(1, Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let docchat = start_docchat(
        dir.path(),
        &format!("[[models]]\nname = \"fake\"\nprovider = \"openai\"\nbase_url = \"{upstream}/v1\"\ncontext_length = 8192\ndefault = true\n"),
        |config| {
            config.models_dir = std::env::var("DOCCHAT_MODELS_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|_| {
                    std::path::PathBuf::from(std::env::var("HOME").unwrap())
                        .join(".cache/docchat/models")
                });
            // One user's calls, far more than a minute's default allowance of asks.
            config.mcp_rate_limit = 1_000_000;
        },
    )
    .await;
    let base = docchat.base.clone();
    let http = Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(ADMIN_KEY)
            .json(&body)
            .send()
    };
    let collection: Value = post(
        "/api/v1/collections",
        json!({"name": "bench", "description": "bench"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let collection = collection["id"].as_str().unwrap().to_owned();
    let text = "The lighthouse keeper Ansel counted 417 gulls on the northern rocks.\n\n".repeat(3)
        + &"Annual rainfall at the station was recorded in millimetres. ".repeat(200);
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(text.into_bytes()).file_name("gulls.txt"),
    );
    let upload: Value = http
        .put(format!("{base}/api/v1/uploads"))
        .bearer_auth(ADMIN_KEY)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let up = upload["id"].as_str().unwrap();
    let r = http
        .post(format!(
            "{base}/api/v1/uploads/{up}/ingest?collection_id={collection}"
        ))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "ingest: {}", r.status());
    loop {
        let c: Value = http
            .get(format!("{base}/api/v1/collections/{collection}"))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if c["document_count"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the document was not ingested");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!(
        "standalone docchat (SQLite), one document, a fake upstream; {calls} calls each, one at a time"
    );
    println!(
        "| call             | path                               | p50 ms  | p99 ms  | errors |"
    );
    println!("|---|---|---|---|---|");
    let key = ADMIN_KEY.to_owned();
    let (h, b, k) = (http.clone(), base.clone(), key.clone());
    let m = load(1, calls, 20, move || {
        rest_collections(h.clone(), b.clone(), k.clone())
    })
    .await;
    row("list collections", "REST GET /api/v1/collections", &m);
    let (h, b, k) = (http.clone(), base.clone(), key.clone());
    let m = load(1, calls, 20, move || {
        mcp(
            h.clone(),
            b.clone(),
            k.clone(),
            "list_collections",
            json!({}),
        )
    })
    .await;
    row("list collections", "MCP list_collections", &m);
    let (h, b, k, c) = (http.clone(), base.clone(), key.clone(), collection.clone());
    let m = load(1, calls, 20, move || {
        mcp(
            h.clone(),
            b.clone(),
            k.clone(),
            "search",
            json!({"query": QUESTION, "collection_id": c}),
        )
    })
    .await;
    row("search", "MCP search (top 8)", &m);
    let (h, b, k, c) = (http.clone(), base.clone(), key.clone(), collection.clone());
    let m = load(1, calls, 20, move || {
        rest_ask(h.clone(), b.clone(), k.clone(), c.clone())
    })
    .await;
    row("ask (RAG)", "REST POST /chats + completions", &m);
    let (h, b, k, c) = (http.clone(), base.clone(), key.clone(), collection.clone());
    let m = load(1, calls, 20, move || {
        mcp(
            h.clone(),
            b.clone(),
            k.clone(),
            "ask",
            json!({"question": QUESTION, "collection_id": c}),
        )
    })
    .await;
    row("ask (RAG)", "MCP ask", &m);
    docchat.stop().await;
}
