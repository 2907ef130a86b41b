//! Added latency of the whole completion path — gateway (REST, auth) → chat-service (gRPC,
//! question and reply stored in SQLite) → a fast local fake upstream — against calling that
//! upstream directly. Time to first content (first answer line; for direct streams the first
//! SSE chunk) and total, p50/p99, at concurrency 1 and 64, streaming and not. Then, per
//! line: a model streaming a stamped word every 5 ms, how long after the model each streamed
//! line reaches the client (p50/p99 over every line, at concurrency 1 and 32) — what the
//! client waits for text that exists, cut into lines by chat-service's progress writes.
//!
//! `cargo run --release -p docchat-server --example bench_latency [requests_c1] [requests_c64] [streams_c1] [streams_c32]`
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
use support::{
    ADMIN_KEY, Measured, Sample, load, now_micros, start_docchat, start_stamped_upstream,
    start_upstream,
};

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

/// One streamed completion of the stamped model: for each line with text, how long (ms)
/// after the model sent its last word the line arrived.
async fn line_lags(http: Client, url: String, key: String) -> Result<Vec<f64>, String> {
    let mut response = http
        .post(&url)
        .bearer_auth(&key)
        .json(&json!({"message": "hello", "llm": "paced", "stream": true}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("docchat {}", response.status()));
    }
    let mut lags = Vec::new();
    let mut buffer = Vec::new();
    let mut finished = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        let at = now_micros();
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let v: Value = serde_json::from_slice(&line).map_err(|e| e.to_string())?;
            finished |= v["finished"] == true;
            let stamp = v["body"]
                .as_str()
                .and_then(|b| b.split_whitespace().last())
                .and_then(|w| w.strip_prefix('t'))
                .and_then(|t| t.parse::<u128>().ok());
            if let Some(stamp) = stamp {
                lags.push(at.saturating_sub(stamp) as f64 / 1000.0);
            }
        }
    }
    if !finished {
        return Err("unfinished stream".into());
    }
    Ok(lags)
}

/// `streams` stamped completions at `concurrency`: every line's lag, sorted, and the errors.
async fn lines_at(
    concurrency: usize,
    streams: usize,
    http: &Client,
    url: &str,
    key: &str,
) -> (Vec<f64>, usize) {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, http, url, key) =
                (next.clone(), http.clone(), url.to_owned(), key.to_owned());
            tokio::spawn(async move {
                let (mut lags, mut errors) = (Vec::new(), 0);
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < streams {
                    match line_lags(http.clone(), url.clone(), key.clone()).await {
                        Ok(l) => lags.extend(l),
                        Err(e) => {
                            eprintln!("error: {e}");
                            errors += 1;
                        }
                    }
                }
                (lags, errors)
            })
        })
        .collect();
    let (mut lags, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (l, e) = t.await.unwrap();
        lags.extend(l);
        errors += e;
    }
    lags.sort_by(f64::total_cmp);
    (lags, errors)
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
    let s1 = args.get(2).copied().unwrap_or(40);
    let s32 = args.get(3).copied().unwrap_or(320);

    let upstream = start_upstream(1, Duration::ZERO);
    let paced = start_stamped_upstream(1, Duration::from_millis(5));
    let dir = tempfile::tempdir().unwrap();
    let docchat = start_docchat(
        dir.path(),
        &format!("[[models]]\nname = \"fake\"\nprovider = \"openai\"\nbase_url = \"{upstream}/v1\"\ncontext_length = 8192\ndefault = true\n\n[[models]]\nname = \"paced\"\nprovider = \"openai\"\nbase_url = \"{paced}/v1\"\ncontext_length = 8192\n"),
        |_| {},
    )
    .await;
    let base = docchat.base.clone();
    let http = Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
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
    println!();
    println!(
        "per line: a model streaming {} stamped words, one every 5 ms; ms from the model's last word of a line to the client",
        support::STAMPED_WORDS
    );
    println!("|   c | streams | lines | line p50 ms | line p99 ms | errors |");
    println!("|---|---|---|---|---|---|");
    for (concurrency, streams) in [(1, s1), (32, s32)] {
        let (lags, errors) = lines_at(concurrency, streams, &http, &completions, &key).await;
        println!(
            "| {concurrency:>3} | {streams:>7} | {:>5} | {:>11.2} | {:>11.2} | {errors:>6} |",
            lags.len(),
            support::percentile(&lags, 0.5),
            support::percentile(&lags, 0.99)
        );
    }
    println!(
        "peak RSS of the whole process (docchat + load + upstream): {:.0} MB",
        support::peak_rss_mb()
    );
    docchat.stop().await;
}
