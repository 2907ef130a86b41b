//! Sandbox start latency: `python3 -c pass` through the whole runner (slot, workspace hand
//! over, the backend, rlimits, supervision, sweep) on every backend this host offers,
//! against the same program run bare. Ignored (a measurement, not a check); run with
//! `nextest run -p docchat-agent-service --run-ignored only -E 'test(sandbox_start)' --no-capture`.

use std::time::{Duration, Instant};

use docchat_sandbox::{CodeRunner, CodeSpec, UserDisk};
use docchat_sandbox::{Mode, Sandbox, Settings};
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
    // The helper reaches the workspace by its real path: searchable by the slot uids.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let mut sandboxes = Vec::new();
    for (mode, name, uid_base) in [
        (Mode::Bubblewrap, "bubblewrap", 64900),
        (Mode::Landlock, "landlock", 64910),
    ] {
        let sandbox = Sandbox::start(Ok(Settings {
            mode,
            dir: dir.path().join(name),
            slots: 2,
            user_slots: 2,
            max_run: Duration::from_secs(900),
            workspace_quota: 1 << 30,
            uid_base,
            helper: Some(docchat_sandbox::testing::helper()),
        }))
        .await;
        if sandbox.status().backend == name {
            sandboxes.push((name, sandbox));
        } else {
            docchat_common::testing::unavailable(&format!("the {name} sandbox"));
        }
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
        user: String::new(),
        disk: UserDisk::default(),
    };
    let mut bare = Vec::new();
    let mut boxed: Vec<Vec<Duration>> = vec![Vec::new(); sandboxes.len()];
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = tokio::process::Command::new("/usr/bin/python3")
            .args(["-c", "pass"])
            .status()
            .await
            .unwrap();
        assert!(status.success());
        bare.push(t.elapsed());
        for ((_, sandbox), times) in sandboxes.iter().zip(&mut boxed) {
            let t = Instant::now();
            let out = sandbox
                .run(spec.clone(), &CancellationToken::new())
                .await
                .unwrap();
            assert_eq!(out.exit_code, Some(0), "{out:?}");
            times.push(t.elapsed());
        }
    }
    let (b50, b99) = percentiles(bare);
    eprintln!("python3 -c pass, {RUNS} runs each: bare p50 {b50:?} p99 {b99:?}");
    for ((name, _), times) in sandboxes.iter().zip(boxed) {
        let (s50, s99) = percentiles(times);
        eprintln!(
            "  {name}: p50 {s50:?} p99 {s99:?}; overhead p50 {:?}",
            s50.saturating_sub(b50)
        );
    }
}
