//! What the gateway benchmarks share: a fast fake OpenAI-compatible upstream (actix-web on
//! its own thread, keep-alive, canned answers), latency percentiles and a load loop.
// Each benchmark uses part of this.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use futures::StreamExt;

/// The canned answer, streamed one word a chunk.
pub const WORDS: usize = 16;

fn answer_words() -> Vec<String> {
    (0..WORDS).map(|i| format!("word{i} ")).collect()
}

/// Words of a stamped answer ([`start_stamped_upstream`]).
pub const STAMPED_WORDS: usize = 100;

#[derive(Clone)]
struct Upstream {
    token_delay: Duration,
    /// Each word is `t<microseconds since the epoch when it was sent> `, so a client on this
    /// machine can tell how long after the model a piece reached it.
    stamped: bool,
}

/// Microseconds since the Unix epoch (this machine's clock).
pub fn now_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// A streamed answer of [`STAMPED_WORDS`] stamped words, one every `delay`.
fn stamped(model: String, delay: Duration) -> HttpResponse {
    let chunk = move |content: String| {
        let chunk = serde_json::json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
        format!("data: {chunk}\n\n")
    };
    let words = futures::stream::iter(0..STAMPED_WORDS).then(move |_| {
        let chunk = chunk.clone();
        async move {
            actix_web::rt::time::sleep(delay).await;
            Ok::<_, actix_web::Error>(web::Bytes::from(chunk(format!("t{} ", now_micros()))))
        }
    });
    let end = futures::stream::once(async {
        Ok::<_, actix_web::Error>(web::Bytes::from_static(b"data: [DONE]\n\n"))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .streaming(words.chain(end))
}

async fn completions(state: web::Data<Upstream>, body: web::Bytes) -> HttpResponse {
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let model = request["model"].as_str().unwrap_or("fake").to_owned();
    if state.stamped && request["stream"] == serde_json::json!(true) {
        return stamped(model, state.token_delay);
    }
    let words = answer_words();
    if request["stream"] != serde_json::json!(true) {
        let text: String = words.concat();
        return HttpResponse::Ok().json(serde_json::json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": WORDS, "total_tokens": 20 + WORDS},
        }));
    }
    let delay = state.token_delay;
    let mut chunks: Vec<String> = words
        .into_iter()
        .map(|w| {
            let chunk = serde_json::json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]});
            format!("data: {chunk}\n\n")
        })
        .collect();
    let usage = serde_json::json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": WORDS, "total_tokens": 20 + WORDS}});
    chunks.push(format!("data: {usage}\n\ndata: [DONE]\n\n"));
    let stream =
        futures::stream::iter(chunks.into_iter().enumerate()).then(move |(i, c)| async move {
            if i > 0 && !delay.is_zero() {
                actix_web::rt::time::sleep(delay).await;
            }
            Ok::<_, actix_web::Error>(web::Bytes::from(c))
        });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .streaming(stream)
}

/// Starts the fake upstream on its own thread with `workers` workers; answers its base URL
/// (`http://127.0.0.1:<port>`, the OpenAI root is `/v1`).
pub fn start_upstream(workers: usize, token_delay: Duration) -> String {
    serve_upstream(
        workers,
        Upstream {
            token_delay,
            stamped: false,
        },
    )
}

/// As [`start_upstream`], streaming stamped words, one every `token_delay`.
pub fn start_stamped_upstream(workers: usize, token_delay: Duration) -> String {
    serve_upstream(
        workers,
        Upstream {
            token_delay,
            stamped: true,
        },
    )
}

fn serve_upstream(workers: usize, upstream: Upstream) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            HttpServer::new(move || {
                App::new()
                    .app_data(web::Data::new(upstream.clone()))
                    .app_data(web::PayloadConfig::new(1 << 20))
                    .route("/v1/chat/completions", web::post().to(completions))
            })
            .workers(workers)
            .backlog(1024)
            .listen(listener)
            .unwrap()
            .run()
            .await
            .unwrap();
        });
    });
    url
}

/// The `p` quantile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Timings of one request: to its first piece of content, and to its end (ms).
#[derive(Clone, Copy)]
pub struct Sample {
    pub first: f64,
    pub total: f64,
}

/// What a load run measured.
pub struct Measured {
    pub first: Vec<f64>,
    pub total: Vec<f64>,
    pub errors: usize,
    pub elapsed: Duration,
}

impl Measured {
    pub fn rps(&self) -> f64 {
        self.total.len() as f64 / self.elapsed.as_secs_f64()
    }
    pub fn p(&self, which: &str, q: f64) -> f64 {
        match which {
            "first" => percentile(&self.first, q),
            _ => percentile(&self.total, q),
        }
    }
}

/// Runs `requests` calls of `one` at `concurrency`, after `warmup` unmeasured ones.
pub async fn load<F, Fut>(concurrency: usize, requests: usize, warmup: usize, one: F) -> Measured
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Sample, String>> + Send,
{
    let one = Arc::new(one);
    for _ in 0..warmup {
        let _ = one().await;
    }
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (one, next) = (one.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut errors = Vec::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < requests {
                match one().await {
                    Ok(s) => samples.push(s),
                    Err(e) => errors.push(e),
                }
            }
            (samples, errors)
        }));
    }
    let mut first = Vec::new();
    let mut total = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (samples, errs) = t.await.unwrap();
        for s in samples {
            first.push(s.first);
            total.push(s.total);
        }
        if let Some(e) = errs.first() {
            eprintln!("error: {e}");
        }
        errors += errs.len();
    }
    let elapsed = started.elapsed();
    first.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    Measured {
        first,
        total,
        errors,
        elapsed,
    }
}

/// Peak resident memory of this process (VmHWM), in MB.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The bootstrap administrator's key of [`start_docchat`].
pub const ADMIN_KEY: &str = "sk-bench-admin-key-0123456789";

/// A standalone docchat (SQLite under `dir`) serving the models of `models_toml`, on a free
/// loopback port, with [`ADMIN_KEY`]; `tweak` adjusts its configuration. Returns once ready.
pub struct Docchat {
    pub base: String,
    shutdown: tokio_util::sync::CancellationToken,
    app: tokio::task::JoinHandle<anyhow::Result<()>>,
}

pub async fn start_docchat(
    dir: &std::path::Path,
    models_toml: &str,
    tweak: impl FnOnce(&mut docchat_common::Config),
) -> Docchat {
    let models = dir.join("models.toml");
    std::fs::write(&models, models_toml).unwrap();
    let mut config = docchat_common::Config::for_test(dir.join("data"));
    config.models_file = Some(models);
    config.bootstrap_admin_key = Some(secrecy::SecretString::from(ADMIN_KEY));
    config.log_format = "text".into();
    tweak(&mut config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let app = tokio::spawn(docchat_server::standalone::run(
        config,
        listener,
        shutdown.clone(),
    ));
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !matches!(http.get(format!("{base}/rpc/health/readiness")).bearer_auth(ADMIN_KEY).send().await, Ok(r) if r.status() == 200)
    {
        assert!(Instant::now() < deadline, "docchat did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Docchat {
        base,
        shutdown,
        app,
    }
}

impl Docchat {
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.app.await;
    }
}
