//! Sandbox start latency: `python3 -c pass` through the whole runner (slot, workspace hand
//! over, bubblewrap, prlimit, supervision, sweep) against the same program run bare.
//! Ignored (a measurement, not a check); run with
//! `nextest run -p docchat-agent-service --run-ignored only -E 'test(sandbox_start)' --no-capture`.

use std::time::{Duration, Instant};

use docchat_agent_service::sandbox::{Mode, Sandbox, Settings};
use docchat_agent_service::tools::{CodeRunner, CodeSpec};
use tokio_util::sync::CancellationToken;

const RUNS: usize = 100;

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[(v.len() * 99).div_ceil(100) - 1])
}

#[tokio::test]
#[ignore = "a measurement; run on its own"]
async fn sandbox_start_latency() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Ok(Settings {
        mode: Mode::Bubblewrap,
        dir: dir.path().join("sandbox"),
        slots: 2,
        uid_base: 64900,
    }))
    .await;
    if sandbox.status().backend != "bubblewrap" {
        docchat_common::testing::unavailable("the bubblewrap sandbox");
        return;
    }
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let spec = CodeSpec {
        argv: vec!["python3".into(), "-c".into(), "pass".into()],
        workspace: workspace.clone(),
        stdin: None,
        wall_clock: Duration::from_secs(30),
        memory_bytes: None,
        documents: None,
    };
    let mut bare = Vec::new();
    let mut boxed = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = tokio::process::Command::new("/usr/bin/python3")
            .args(["-c", "pass"])
            .status()
            .await
            .unwrap();
        assert!(status.success());
        bare.push(t.elapsed());
        let t = Instant::now();
        let out = sandbox
            .run(spec.clone(), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        boxed.push(t.elapsed());
    }
    let (b50, b99) = percentiles(bare);
    let (s50, s99) = percentiles(boxed);
    eprintln!(
        "python3 -c pass, {RUNS} runs: bare p50 {b50:?} p99 {b99:?}; sandboxed p50 {s50:?} p99 {s99:?}; overhead p50 {:?}",
        s50.saturating_sub(b50)
    );
}
