//! The sandbox's slots are shared fairly (issue 37): one user flooding the sandbox with long
//! runs holds only its share of the slots, so another user's one-line run starts at once;
//! no single run holds a slot longer than `DOCCHAT_SANDBOX_MAX_RUN_SECONDS`; and a run
//! cannot fill the disk past its workspace's quota (`DOCCHAT_WORKSPACE_QUOTA_MB`) or its
//! user's workspaces together past the user's (`DOCCHAT_USER_DISK_QUOTA_MB`). On both
//! backends (a backend this host does not offer fails in CI, as in containment.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use docchat_sandbox::{CodeRunner, CodeSpec, OverQuota, UserDisk};
use docchat_sandbox::{Mode, Sandbox, Settings};
use tokio_util::sync::CancellationToken;

struct Lab {
    sandbox: Arc<Sandbox>,
    dir: tempfile::TempDir,
}

/// 4 slots, 1 per user (the default share: a quarter), runs of at most `max_run`.
async fn lab(mode: Mode, base: u32, max_run: Duration) -> Option<Lab> {
    lab_with(mode, base, max_run, 1 << 30).await
}

async fn lab_with(mode: Mode, base: u32, max_run: Duration, quota: u64) -> Option<Lab> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let name = if mode == Mode::Bubblewrap {
        "bubblewrap"
    } else {
        "landlock"
    };
    let sandbox = Sandbox::start(Ok(Settings {
        mode,
        dir: dir.path().join("sandbox"),
        slots: 4,
        user_slots: 1,
        max_run,
        workspace_quota: quota,
        uid_base: base,
        helper: Some(docchat_sandbox::testing::helper()),
    }))
    .await;
    if sandbox.status().backend != name {
        docchat_common::testing::unavailable(&format!("the {name} sandbox"));
        return None;
    }
    Some(Lab {
        sandbox: Arc::new(sandbox),
        dir,
    })
}

impl Lab {
    /// Runs `spec`, which must end (stopped or not) within a minute.
    async fn finished(&self, spec: CodeSpec) -> docchat_sandbox::CodeOutput {
        tokio::time::timeout(
            Duration::from_secs(60),
            self.sandbox.run(spec, &CancellationToken::new()),
        )
        .await
        .expect("the run was not stopped")
        .unwrap()
    }

    fn spec(&self, user: &str, n: usize, command: &str, wall: Duration) -> CodeSpec {
        let workspace = self.dir.path().join(format!("{user}-{n}"));
        std::fs::create_dir_all(&workspace).unwrap();
        CodeSpec {
            argv: vec!["sh".into(), "-c".into(), command.into()],
            workspace,
            stdin: None,
            wall_clock: wall,
            memory_bytes: None,
            documents: None,
            user: user.into(),
            disk: UserDisk::default(),
        }
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the flood's runs are plain tasks the test awaits"
)]
async fn a_flood_leaves_room_for_others(mode: Mode, base: u32) {
    let Some(lab) = lab(mode, base, Duration::from_secs(900)).await else {
        return;
    };
    // One user starts as many long runs as there are slots.
    let stop = CancellationToken::new();
    let flood: Vec<_> = (0..4)
        .map(|n| {
            let (sandbox, stop) = (lab.sandbox.clone(), stop.clone());
            let spec = lab.spec("flooder", n, "sleep 60", Duration::from_secs(120));
            tokio::spawn(async move { sandbox.run(spec, &stop).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let load = loop {
        let (_, load) = lab.sandbox.load().unwrap();
        if load.in_use + load.waiting == 4 || Instant::now() > deadline {
            break load;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (load.in_use, load.waiting, load.users_waiting),
        (1, 3, 1),
        "the flooder holds its share (one slot), its other runs wait: {load:?}"
    );
    // Another user's one-line run starts at once: it does not wait for the flood.
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        lab.sandbox.run(
            lab.spec("other", 0, "echo hello", Duration::from_secs(10)),
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the other user's run waited for the flooder's")
    .unwrap();
    eprintln!(
        "second user's one-line run while the slots are flooded: {:?}",
        started.elapsed()
    );
    assert_eq!(out.stdout.trim(), "hello", "{out:?}");
    stop.cancel();
    for run in flood {
        let out = run.await.unwrap().unwrap();
        assert!(out.cancelled, "{out:?}");
    }
    let (_, load) = lab.sandbox.load().unwrap();
    assert_eq!((load.in_use, load.waiting), (0, 0), "{load:?}");
}

async fn one_run_holds_a_slot_at_most_max_run(mode: Mode, base: u32) {
    let Some(lab) = lab(mode, base, Duration::from_secs(1)).await else {
        return;
    };
    // The run asks for a minute; the sandbox's bound is one second.
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        lab.sandbox.run(
            lab.spec("user", 0, "sleep 60", Duration::from_secs(60)),
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the run held its slot past the sandbox's bound")
    .unwrap();
    assert!(out.timed_out, "{out:?}");
}

#[tokio::test]
async fn a_flood_leaves_room_for_others_bubblewrap() {
    a_flood_leaves_room_for_others(Mode::Bubblewrap, 64720).await;
}

#[tokio::test]
async fn a_flood_leaves_room_for_others_landlock() {
    a_flood_leaves_room_for_others(Mode::Landlock, 64724).await;
}

#[tokio::test]
async fn one_run_holds_a_slot_at_most_max_run_bubblewrap() {
    one_run_holds_a_slot_at_most_max_run(Mode::Bubblewrap, 64728).await;
}

#[tokio::test]
async fn one_run_holds_a_slot_at_most_max_run_landlock() {
    one_run_holds_a_slot_at_most_max_run(Mode::Landlock, 64732).await;
}

const MIB: u64 = 1 << 20;

async fn a_workspace_past_its_quota_stops_the_run(mode: Mode, base: u32) {
    let Some(lab) = lab_with(mode, base, Duration::from_secs(900), 8 * MIB).await else {
        return;
    };
    let run = |code: &str, n: usize| {
        lab.finished(lab.spec(
            "user",
            n,
            &format!("python3 -c \"{code}\""),
            Duration::from_secs(120),
        ))
    };
    // Files each under what is left, 15 MiB together, then a long wait: the watch stops it.
    let out = run(
        "import time\nfor i in range(5): open(f'f{i}', 'wb').write(bytes(3 << 20))\ntime.sleep(100)",
        0,
    )
    .await;
    assert_eq!(
        out.over_quota,
        Some(OverQuota::Workspace(8 * MIB)),
        "{out:?}"
    );
    assert!(!out.timed_out, "{out:?}");
    // One file larger than the quota is cut at what is left, and the run says why.
    let out = run("open('big', 'wb').write(bytes(20 << 20))", 1).await;
    assert_eq!(
        out.over_quota,
        Some(OverQuota::Workspace(8 * MIB)),
        "{out:?}"
    );
    let big = std::fs::metadata(lab.dir.path().join("user-1/big")).map_or(0, |m| m.len());
    assert!(big <= 8 * MIB, "a file grew past the quota: {big}");
    // Under the quota nothing is said.
    let out = run("open('small', 'wb').write(bytes(1 << 20))", 2).await;
    assert_eq!((out.over_quota, out.exit_code), (None, Some(0)), "{out:?}");
}

#[tokio::test]
async fn a_workspace_past_its_quota_stops_the_run_bubblewrap() {
    a_workspace_past_its_quota_stops_the_run(Mode::Bubblewrap, 64736).await;
}

#[tokio::test]
async fn a_workspace_past_its_quota_stops_the_run_landlock() {
    a_workspace_past_its_quota_stops_the_run(Mode::Landlock, 64740).await;
}

/// A run's workspace counts with the user's other workspaces against the user's total: the
/// run is stopped past it even though its own workspace is far under its quota.
async fn the_users_workspaces_together_stop_the_run(mode: Mode, base: u32) {
    let Some(lab) = lab_with(mode, base, Duration::from_secs(900), 1 << 30).await else {
        return;
    };
    let other = lab.dir.path().join("user-other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("kept"), vec![1u8; 6 << 20]).unwrap();
    let run = |code: &str, n: usize| {
        let mut spec = lab.spec(
            "user",
            n,
            &format!("python3 -c \"{code}\""),
            Duration::from_secs(120),
        );
        spec.disk = UserDisk {
            quota: Some(10 * MIB),
            others: vec![other.clone()].into(),
        };
        lab.finished(spec)
    };
    // 6 MiB elsewhere and 2 MiB files here under what is left, 6 MiB here in all: stopped.
    let out = run(
        "import time\nfor i in range(3): open(f'f{i}', 'wb').write(bytes(2 << 20))\ntime.sleep(100)",
        0,
    )
    .await;
    assert_eq!(out.over_quota, Some(OverQuota::User(10 * MIB)), "{out:?}");
    assert!(!out.timed_out, "{out:?}");
    // What is left of the total bounds one file.
    let out = run("open('big', 'wb').write(bytes(8 << 20))", 1).await;
    assert_eq!(out.over_quota, Some(OverQuota::User(10 * MIB)), "{out:?}");
    let big = std::fs::metadata(lab.dir.path().join("user-1/big")).map_or(0, |m| m.len());
    assert!(big <= 4 * MIB, "a file grew past the user's total: {big}");
    // Under the total nothing is said.
    let out = run("open('small', 'wb').write(bytes(1 << 20))", 2).await;
    assert_eq!((out.over_quota, out.exit_code), (None, Some(0)), "{out:?}");
}

#[tokio::test]
async fn the_users_workspaces_together_stop_the_run_bubblewrap() {
    the_users_workspaces_together_stop_the_run(Mode::Bubblewrap, 64744).await;
}

#[tokio::test]
async fn the_users_workspaces_together_stop_the_run_landlock() {
    the_users_workspaces_together_stop_the_run(Mode::Landlock, 64748).await;
}
