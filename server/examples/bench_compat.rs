//! The compatible API side by side with its peers, in one run, against the same fast local
//! fake upstream: direct to the upstream, through docchat's `/compat_api/v1` (standalone,
//! its own process) and, when given, through LiteLLM's proxy (2 workers, no database).
//! Requests/s and p50/p99 at concurrency 1, 16 and 64, streaming and not; then the stream
//! with 5 ms between upstream tokens (does anything buffer?); then docchat's peak memory.
//!
//! `bench/compat/run.sh` builds, installs LiteLLM and runs this; by hand:
//! `cargo build --release -p docchat-server --bin gateway --example bench_compat &&
//!  target/release/examples/bench_compat [--requests N] [--litellm PATH_TO_LITELLM]
//!  [--gateway PATH]` (another gateway binary than the one built beside it: the same driver
//!  for a before/after comparison of two builds)
//! Run it alone: the load, the upstream and the proxies share the machine's cores.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes,
    clippy::disallowed_methods
)] // a benchmark binary: fail loudly; the children are stopped at the end, tasks with the run

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::json;
use support::{Measured, Sample, load, start_upstream};

const KEY: &str = "sk-bench-admin-key-0123456789";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// One proxy (or the upstream itself) under test.
#[derive(Clone)]
struct Target {
    name: &'static str,
    url: String,
    key: Option<String>,
    /// The model asked for.
    model: &'static str,
}

/// One chat completion; `first` is the first body chunk, `total` the end of the answer.
async fn call(http: Client, target: Target, stream: bool) -> Result<Sample, String> {
    let start = Instant::now();
    let mut request = http.post(&target.url).json(&json!({
        "model": target.model,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": stream,
        "max_tokens": 64,
    }));
    if let Some(key) = &target.key {
        request = request.bearer_auth(key);
    }
    let mut response = request.send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        let status = response.status();
        return Err(format!(
            "{} {status}: {}",
            target.name,
            response.text().await.unwrap_or_default()
        ));
    }
    let mut first = None;
    let mut tail = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if first.is_none() && !chunk.is_empty() {
            first = Some(ms(start));
        }
        if stream {
            tail.extend_from_slice(&chunk);
            if tail.len() > 64 {
                tail.drain(..tail.len() - 64);
            }
        }
    }
    let total = ms(start);
    if stream && !tail.windows(6).any(|w| w == b"[DONE]") {
        return Err(format!(
            "{}: stream without [DONE]: {}",
            target.name,
            String::from_utf8_lossy(&tail)
        ));
    }
    Ok(Sample {
        first: first.unwrap_or(total),
        total,
    })
}

/// Starts a child process and waits until `ready` answers 200.
async fn spawn(
    http: &Client,
    what: &str,
    command: &mut Command,
    ready: &str,
    key: Option<&str>,
) -> Child {
    use std::os::unix::process::CommandExt;
    // Its own process group, so stopping it stops its workers too.
    let child = command
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut r = http.get(ready);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        if matches!(r.send().await, Ok(r) if r.status() == 200) {
            return child;
        }
        assert!(Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Peak resident memory (VmHWM) of a process, in MB.
fn peak_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU time a process has used so far, all its threads, in nanoseconds (the scheduler's own
/// count, `/proc/PID/task/*/schedstat`: finer than the clock ticks of `/proc/PID/stat`).
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A row of the table; `cpu_us`: the proxy's CPU time per request, where measured.
fn row(target: &str, stream: bool, concurrency: usize, m: &Measured, cpu_us: Option<f64>) {
    println!(
        "| {target:<8} | {:<9} | {concurrency:>3} | {:>8.0} | {:>8.3} | {:>8.3} | {:>6} | {:>10} |",
        if stream { "streaming" } else { "plain" },
        m.rps(),
        m.p("total", 0.5),
        m.p("total", 0.99),
        m.errors,
        cpu_us.map_or_else(|| "-".to_owned(), |us| format!("{us:.0}"))
    );
}

struct Args {
    requests: usize,
    litellm: Option<String>,
    gateway: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut out = Args {
        requests: 3000,
        litellm: None,
        gateway: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--requests" => out.requests = it.next().and_then(|v| v.parse().ok()).unwrap_or(3000),
            "--litellm" => out.litellm = it.next(),
            "--gateway" => out.gateway = it.next().map(Into::into),
            other => panic!("unknown argument {other}"),
        }
    }
    out
}

#[tokio::main]
async fn main() {
    let args = args();
    let http = Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let fast = start_upstream(1, Duration::ZERO);
    let slow = start_upstream(1, Duration::from_millis(5));
    let dir = tempfile::tempdir().unwrap();

    // docchat standalone, its own process, with the fake upstream as model `fake` (and as an
    // embedding upstream: standalone refuses to start without an embedder, and the compatible
    // API never embeds).
    let models = dir.path().join("models.toml");
    std::fs::write(
        &models,
        format!(
            "[[models]]\nname = \"fake\"\nbase_url = \"{fast}/v1\"\ndefault = true\n\n[[models]]\nname = \"slow\"\nbase_url = \"{slow}/v1\"\n\n\
             [[models]]\nname = \"embed\"\nkind = \"embedding\"\nbase_url = \"{fast}/v1\"\n"
        ),
    )
    .unwrap();
    let gateway = args.gateway.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .unwrap()
            .parent()
            .and_then(|examples| examples.parent())
            .unwrap()
            .join("gateway")
    });
    println!("docchat: {}", gateway.display());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut docchat = spawn(
        &http,
        "docchat",
        Command::new(&gateway)
            .arg("--standalone")
            .env("DOCCHAT_MODELS_FILE", &models)
            .env("DOCCHAT_MODELS_DIR", dir.path().join("no-local-models"))
            .env("DOCCHAT_DATA_DIR", dir.path().join("data"))
            .env("DOCCHAT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("DOCCHAT_BOOTSTRAP_ADMIN_KEY", KEY)
            .env("RUST_LOG", "warn"),
        &format!("{base}/rpc/health/readiness"),
        Some(KEY),
    )
    .await;

    let mut litellm = None;
    let mut targets = vec![
        Target {
            name: "direct",
            url: format!("{fast}/v1/chat/completions"),
            key: None,
            model: "fake",
        },
        Target {
            name: "docchat",
            url: format!("{base}/compat_api/v1/chat/completions"),
            key: Some(KEY.to_owned()),
            model: "fake",
        },
    ];
    if let Some(bin) = &args.litellm {
        let config = dir.path().join("litellm.yaml");
        std::fs::write(
            &config,
            format!(
                "model_list:\n  - model_name: fake\n    litellm_params:\n      model: openai/fake\n      api_base: {fast}/v1\n      api_key: none\n"
            ),
        )
        .unwrap();
        let port = free_port();
        litellm = Some(
            spawn(
                &http,
                "litellm",
                Command::new(bin)
                    .args(["--config"])
                    .arg(&config)
                    .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--num_workers", "2"])
                    .env("LITELLM_LOG", "ERROR")
                    .env("LITELLM_TELEMETRY", "False"),
                &format!("http://127.0.0.1:{port}/health/liveliness"),
                None,
            )
            .await,
        );
        targets.push(Target {
            name: "litellm",
            url: format!("http://127.0.0.1:{port}/v1/chat/completions"),
            key: None,
            model: "fake",
        });
    }

    println!(
        "fake upstream: {} words per answer; load, upstream and proxies share the machine",
        support::WORDS
    );
    println!("| target   | mode      |   c |    req/s |  p50 ms |  p99 ms | errors | CPU us/req |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut results: Vec<(&str, bool, usize, Measured, Option<f64>)> = Vec::new();
    for stream in [false, true] {
        for concurrency in [1, 16, 64] {
            for target in &targets {
                // LiteLLM serves ~100 req/s: fewer requests keep its rows short.
                let n = if target.name == "litellm" {
                    (args.requests / 5).max(200)
                } else {
                    args.requests
                };
                let (h, t) = (http.clone(), target.clone());
                // docchat's CPU time for the row's requests (warm-up included: 50 more).
                let cpu_before = (target.name == "docchat").then(|| cpu_ns(docchat.id()));
                let m = load(concurrency, n, 50, move || {
                    call(h.clone(), t.clone(), stream)
                })
                .await;
                let cpu_us = cpu_before.map(|before| {
                    (cpu_ns(docchat.id()) - before) as f64 / 1000.0 / (n + 50) as f64
                });
                row(target.name, stream, concurrency, &m, cpu_us);
                results.push((target.name, stream, concurrency, m, cpu_us));
            }
        }
    }

    let find = |name: &str, stream: bool, c: usize| {
        results
            .iter()
            .find(|(n, s, cc, _, _)| *n == name && *s == stream && *cc == c)
            .map(|(_, _, _, m, cpu)| (m, *cpu))
    };
    println!();
    println!("added over direct (ms) and throughput against LiteLLM:");
    for stream in [false, true] {
        let mode = if stream { "streaming" } else { "plain" };
        let (direct, _) = find("direct", stream, 1).unwrap();
        for name in ["docchat", "litellm"] {
            if let Some((m, cpu)) = find(name, stream, 1) {
                println!(
                    "  {mode:<9} c=1  {name:<8} added p50 {:.3}  p99 {:.3}{}",
                    m.p("total", 0.5) - direct.p("total", 0.5),
                    m.p("total", 0.99) - direct.p("total", 0.99),
                    cpu.map_or_else(String::new, |us| format!("  CPU {us:.0} us/req"))
                );
            }
        }
        if let Some((d, cpu)) = find("docchat", stream, 64) {
            print!(
                "  {mode:<9} c=64 docchat {:.0} req/s, CPU {:.0} us/req",
                d.rps(),
                cpu.unwrap_or(f64::NAN)
            );
            match find("litellm", stream, 64) {
                Some((l, _)) => println!(" = {:.1}x LiteLLM", d.rps() / l.rps()),
                None => println!(),
            }
        }
    }

    // 5 ms between upstream tokens: a proxy that passes tokens on as they come ends within
    // a hair of the direct stream; one that buffers shows the whole delay again.
    let slow_direct = Target {
        name: "direct",
        url: format!("{slow}/v1/chat/completions"),
        key: None,
        model: "fake",
    };
    // docchat's `slow` model is the delayed upstream.
    let slow_docchat = Target {
        name: "docchat",
        url: format!("{base}/compat_api/v1/chat/completions"),
        key: Some(KEY.to_owned()),
        model: "slow",
    };
    let streams = |t: Target| {
        let h = http.clone();
        move || call(h.clone(), t.clone(), true)
    };
    let d = load(1, 200, 10, streams(slow_direct)).await;
    let t = load(1, 200, 10, streams(slow_docchat)).await;
    println!();
    println!(
        "stream with 5 ms between tokens ({} tokens), c=1: direct p50 {:.2} ms, docchat p50 {:.2} ms (+{:.2}), p99 +{:.2}",
        support::WORDS,
        d.p("total", 0.5),
        t.p("total", 0.5),
        t.p("total", 0.5) - d.p("total", 0.5),
        t.p("total", 0.99) - d.p("total", 0.99)
    );
    println!(
        "docchat peak RSS (the whole standalone process: gateway, chat-service and the other services): {:.0} MB",
        peak_rss_mb(docchat.id())
    );

    stop(&mut docchat);
    if let Some(mut l) = litellm {
        stop(&mut l);
    }
}

/// Stops a child's whole process group: SIGTERM to the group, SIGKILL after 10 s (a proxy
/// still draining keep-alive connections), then reaps it. With the system call, not the
/// `kill` program: procps-ng 4.0.2's `kill -TERM -<pgid>` signals every process of the user
/// for some group ids (seen with 14: it stopped this machine's PostgreSQL and RabbitMQ).
fn stop(child: &mut Child) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let Ok(id) = i32::try_from(child.id()) else {
        return;
    };
    let group = Pid::from_raw(id);
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
}
