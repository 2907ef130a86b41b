//! The README's run command on a fresh machine: `gateway --standalone` without an embedder
//! refuses to start (exit 2) and names the command that fetches it, instead of serving and
//! failing every ingestion later; with an embedder (here an embedding upstream in the models
//! file, so the test needs no model files) it starts and serves. On SIGTERM it keeps serving
//! for `DOCCHAT_SHUTDOWN_DELAY_SECONDS` with readiness 503, then exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: fail loudly

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The gateway binary with a clean docchat environment: only what `envs` sets.
fn gateway(data: &Path, models: &Path, envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gateway"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("DOCCHAT_") {
            cmd.env_remove(key);
        }
    }
    cmd.arg("--standalone")
        .env("DOCCHAT_DATA_DIR", data)
        .env("DOCCHAT_MODELS_DIR", models)
        .env("RUST_LOG", "warn")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for the child to exit within `limit`; kills it and fails the test otherwise.
fn exit_within(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the gateway was still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

const KEY: &str = "sk-startup-test-key";

/// One authenticated GET; the status line and what followed, or "" when nothing answered.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn standalone_without_the_embedder_refuses_to_start_and_names_the_fetch_command() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let models = dir.path().join("empty models");
    std::fs::create_dir_all(&models).unwrap();
    let port = free_port().to_string();
    let child = gateway(
        &data,
        &models,
        &[("DOCCHAT_HTTP_ADDR", &format!("127.0.0.1:{port}"))],
    )
    .spawn()
    .unwrap();
    let out = exit_within(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains("embedding model all-MiniLM-L6-v2 is missing"),
        "{stderr}"
    );
    // The exact command, with the (absolute, quoted: it has a space) models dir.
    let command = format!(
        "scripts/fetch-models.sh '{}'",
        std::path::absolute(&models).unwrap().display()
    );
    assert!(
        stderr.contains(&command),
        "expected {command:?} in:\n{stderr}"
    );
    // Refused before anything started: no databases, no listener.
    assert!(!data.exists(), "the data dir was created");
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err());
}

/// Starts `gateway --standalone` with an embedding upstream in its models file (named,
/// never called at start, so no model files are needed) and the bootstrap key `KEY`; waits
/// until it answers ready on its REST port, or fails the test. The child and its address.
fn start_serving(dir: &Path, envs: &[(&str, &str)]) -> (Child, String) {
    let data = dir.join("data");
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let models_file = dir.join("models.toml");
    // Nothing listens there.
    std::fs::write(
        &models_file,
        "[[models]]\nname = \"remote-embedder\"\nbase_url = \"http://127.0.0.1:9/v1\"\nkind = \"embedding\"\ndimensions = 8\n",
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = gateway(
        &data,
        &models,
        &[
            ("DOCCHAT_HTTP_ADDR", &addr),
            ("DOCCHAT_MODELS_FILE", models_file.to_str().unwrap()),
            ("DOCCHAT_BOOTSTRAP_ADMIN_KEY", KEY),
        ],
    )
    .envs(envs.iter().copied())
    .spawn()
    .unwrap();
    // The listener is bound before the services start, so a connect alone proves nothing:
    // wait for an HTTP answer, which comes only once every service is ready.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if http_get(&addr, "/rpc/health/readiness").starts_with("HTTP/1.1 200") {
            return (child, addr);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "the gateway did not serve; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn standalone_with_an_embedding_upstream_starts_without_model_files() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = start_serving(dir.path(), &[]);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn sigterm_keeps_serving_through_the_shutdown_delay_then_exits_cleanly() {
    const DELAY: Duration = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    let probe = format!("127.0.0.1:{}", free_port());
    let (child, addr) = start_serving(
        dir.path(),
        &[
            ("DOCCHAT_PROBE_ADDR", &probe),
            ("DOCCHAT_SHUTDOWN_DELAY_SECONDS", "3"),
        ],
    );
    assert!(http_get(&probe, "/readyz").starts_with("HTTP/1.1 200"));
    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // Readiness turns at once, so whatever routes requests stops sending them here...
    let mut ready = String::new();
    while signalled.elapsed() < Duration::from_secs(2) {
        ready = http_get(&probe, "/readyz");
        if ready.starts_with("HTTP/1.1 503") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready:?}");
    assert!(ready.contains("gateway (stopping)"), "{ready}");
    // ...while a request that still reaches it, on a new connection, is served.
    let answer = http_get(&addr, "/rpc/health/liveness");
    // The authenticated readiness route on the REST port says the same as the probe.
    let rest_ready = http_get(&addr, "/rpc/health/readiness");
    assert!(
        signalled.elapsed() < DELAY,
        "the checks took the whole delay"
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(rest_ready.starts_with("HTTP/1.1 503"), "{rest_ready:?}");
    assert!(rest_ready.contains("gateway (stopping)"), "{rest_ready}");
    // Then it stops listening and exits cleanly, not before the delay.
    let out = exit_within(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}; stderr:\n{stderr}", out.status);
    assert!(
        signalled.elapsed() >= DELAY,
        "exited {:?} after SIGTERM",
        signalled.elapsed()
    );
    assert!(std::net::TcpStream::connect(&addr).is_err());
}
