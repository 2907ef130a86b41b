//! The sandbox's containment suite (AGENTS.md §2), against every backend this host offers:
//! bubblewrap today (the Landlock helper is not built). Each case is its own test; a missing
//! backend fails in CI and is a loud skip elsewhere. Every test sees the failure it guards
//! against: each containment was broken once on purpose and its test went red.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use docchat_agent_service::sandbox::{Mode, Sandbox, Settings, supervise};
use docchat_agent_service::tools::{CodeOutput, CodeRunner, CodeSpec};
use tokio_util::sync::CancellationToken;

/// A bubblewrap sandbox of its own for one test (its own slot uids from `base`, so tests
/// running in parallel never share a uid), and a directory for the test's files.
struct Lab {
    sandbox: Sandbox,
    dir: tempfile::TempDir,
    workspace: PathBuf,
}

async fn lab(base: u32) -> Option<Lab> {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        mode: Mode::Bubblewrap,
        dir: dir.path().join("sandbox"),
        slots: 2,
        uid_base: 64300 + base * 4,
    };
    let sandbox = Sandbox::start(Ok(settings)).await;
    let status = sandbox.status();
    if status.backend != "bubblewrap" {
        docchat_common::testing::unavailable(&format!(
            "the bubblewrap sandbox ({}: {}; scripts/sandbox-runtime.sh installs it)",
            status.backend, status.detail
        ));
        return None;
    }
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    Some(Lab {
        sandbox,
        dir,
        workspace,
    })
}

impl Lab {
    fn spec(&self, argv: &[&str], stdin: Option<&str>, wall: Duration) -> CodeSpec {
        CodeSpec {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            workspace: self.workspace.clone(),
            stdin: stdin.map(|s| s.as_bytes().to_vec()),
            wall_clock: wall,
            memory_bytes: None,
            documents: None,
        }
    }

    async fn run(&self, spec: CodeSpec) -> CodeOutput {
        self.sandbox
            .run(spec, &CancellationToken::new())
            .await
            .unwrap()
    }

    async fn python(&self, code: &str) -> CodeOutput {
        self.run(self.spec(&["python3", "-"], Some(code), Duration::from_secs(20)))
            .await
    }

    async fn sh(&self, script: &str, wall: Duration) -> CodeOutput {
        self.run(self.spec(&["sh", "-c", script], None, wall)).await
    }

    /// A path outside the workspace (the test's own directory).
    fn outside(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The program ran to the end (exit 0) and printed exactly `expected` lines.
#[track_caller]
fn says(out: &CodeOutput, expected: &[&str]) {
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines, expected, "{out:?}");
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(marker)
                .then(|| format!("{}: {cmd}", e.file_name().to_string_lossy()))
        })
        .collect()
}

#[tokio::test]
async fn network_a_listener_on_the_hosts_loopback_is_unreachable() {
    let Some(lab) = lab(0).await else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = lab
        .python(&format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('CONNECTED')\nexcept OSError as e:\n    print('BLOCKED')\n"
        ))
        .await;
    says(&out, &["BLOCKED"]);
    assert!(listener.accept().is_err(), "the listener saw a connection");
}

#[tokio::test]
async fn network_dns_fails() {
    let Some(lab) = lab(1).await else { return };
    // The host's resolver, asked directly as well as through the resolver library.
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let server = resolv
        .lines()
        .find_map(|l| l.strip_prefix("nameserver"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "127.0.0.53".into());
    let out = lab
        .python(&format!(
            r#"import socket, struct
try:
    socket.getaddrinfo('deb.debian.org', 443)
    print('RESOLVED')
except OSError:
    print('NO-NAME')
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(p)]) + p.encode() for p in 'deb.debian.org'.split('.')) + b'\x00' + struct.pack('>HH', 1, 1)
s = socket.socket(socket.AF_INET6 if ':' in '{server}' else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.sendto(q, ('{server}', 53))
    s.recvfrom(512)
    print('ANSWERED')
except OSError:
    print('NO-ANSWER')
"#
        ))
        .await;
    says(&out, &["NO-NAME", "NO-ANSWER"]);
}

#[tokio::test]
async fn network_udp_to_the_host_is_lost() {
    let Some(lab) = lab(2).await else { return };
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let out = lab
        .python(&format!(
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n    for _ in range(20): s.sendto(b'escape', ('127.0.0.1', {port}))\nexcept OSError:\n    pass\nprint('SENT')\n"
        ))
        .await;
    says(&out, &["SENT"]);
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        socket.recv_from(&mut buf).is_err(),
        "a datagram from the sandbox reached the host"
    );
}

#[tokio::test]
async fn filesystem_a_private_file_outside_is_unreadable() {
    let Some(lab) = lab(3).await else { return };
    let secret = lab.outside("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = lab
        .python(&format!(
            "for p in ['{}', '/etc/shadow', '/root/.bashrc']:\n    try:\n        open(p).read()\n        print('READ', p)\n    except OSError:\n        print('DENIED')\n",
            secret.display()
        ))
        .await;
    says(&out, &["DENIED", "DENIED", "DENIED"]);
}

#[tokio::test]
async fn filesystem_writing_outside_the_workspace_fails() {
    let Some(lab) = lab(4).await else { return };
    let canary = lab.outside("canary");
    let out = lab
        .python(&format!(
            "for p in ['{}', '/usr/canary', '/etc/canary', '/canary']:\n    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n    except OSError:\n        print('DENIED')\n",
            canary.display()
        ))
        .await;
    says(&out, &["DENIED", "DENIED", "DENIED", "DENIED"]);
    for p in [
        canary,
        PathBuf::from("/usr/canary"),
        PathBuf::from("/etc/canary"),
        PathBuf::from("/canary"),
    ] {
        assert!(!p.exists(), "{} was written", p.display());
    }
}

#[tokio::test]
async fn filesystem_a_symlink_out_of_the_workspace_leads_nowhere() {
    let Some(lab) = lab(5).await else { return };
    let outside = lab.outside("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(&outside, lab.workspace.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("data.txt"), lab.workspace.join("file-link")).unwrap();
    let out = lab
        .python(
            "for p in ['link/data.txt', 'file-link']:\n    try:\n        open(p).read()\n        print('READ', p)\n    except OSError:\n        print('DENIED')\ntry:\n    open('link/new.txt', 'w').write('x')\n    print('WROTE')\nexcept OSError:\n    print('DENIED')\n",
        )
        .await;
    says(&out, &["DENIED", "DENIED", "DENIED"]);
    assert!(!outside.join("new.txt").exists());
}

#[tokio::test]
async fn filesystem_dotdot_reaches_only_the_sandboxs_root() {
    let Some(lab) = lab(6).await else { return };
    std::fs::write(lab.outside("beside.txt"), "beside").unwrap();
    let out = lab
        .python(
            "import os\ntry:\n    open('../beside.txt').read()\n    print('READ')\nexcept OSError:\n    print('DENIED')\nprint(sorted(set(os.listdir('../..')) & {'home', 'root', 'var', 'work', 'opt', 'srv'}))\n",
        )
        .await;
    says(&out, &["DENIED", "[]"]);
}

#[tokio::test]
async fn filesystem_the_workspace_is_readable_and_writable() {
    let Some(lab) = lab(7).await else { return };
    std::fs::write(lab.workspace.join("given.txt"), "from the service").unwrap();
    let out = lab
        .python(
            "import os\nprint(os.getcwd())\nprint(open('given.txt').read())\nos.makedirs('out/deep', exist_ok=True)\nopen('out/deep/result.txt', 'w').write('from the sandbox')\nopen('/tmp/scratch', 'w').write('tmp works')\nprint(open('/tmp/scratch').read())\n",
        )
        .await;
    says(&out, &["/workspace", "from the service", "tmp works"]);
    assert_eq!(
        std::fs::read_to_string(lab.workspace.join("out/deep/result.txt")).unwrap(),
        "from the sandbox"
    );
}

#[tokio::test]
async fn processes_a_fork_bomb_ends_on_time_and_leaves_nothing() {
    let Some(lab) = lab(8).await else { return };
    let marker = format!("forkbomb-{}", std::process::id());
    let started = Instant::now();
    // Every process forks for ever: only the wall clock ends it.
    let bomb =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let out = lab
        .run(lab.spec(
            &["python3", "-c", bomb, &marker],
            None,
            Duration::from_secs(3),
        ))
        .await;
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert!(took < Duration::from_secs(6), "took {took:?}: {out:?}");
    // Nothing of it left: the pid namespace died with the run (and the slot uid was swept).
    let deadline = Instant::now() + Duration::from_secs(2);
    while !processes_with(&marker).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_with(&marker), Vec::<String>::new());
    // The sandbox still works.
    says(
        &lab.sh("echo alive", Duration::from_secs(10)).await,
        &["alive"],
    );
}

#[tokio::test]
async fn processes_are_capped_per_run() {
    let Some(lab) = lab(9).await else { return };
    let out = lab
        .python(
            "import subprocess\nps = []\ntry:\n    for _ in range(200):\n        ps.append(subprocess.Popen(['sleep', '5']))\nexcept OSError:\n    pass\nprint(len(ps) < 100)\nfor p in ps: p.kill()\n",
        )
        .await;
    says(&out, &["True"]);
}

#[tokio::test]
async fn memory_two_gib_under_a_256_mib_cap_is_refused() {
    let Some(lab) = lab(10).await else { return };
    let mut spec = lab.spec(
        &["python3", "-"],
        Some("try:\n    b = bytearray(2 << 30)\n    print('ALLOCATED')\nexcept MemoryError:\n    print('REFUSED')\n"),
        Duration::from_secs(20),
    );
    spec.memory_bytes = Some(256 << 20);
    says(&lab.run(spec).await, &["REFUSED"]);
}

#[tokio::test]
async fn time_a_busy_loop_is_killed_at_the_wall_clock() {
    let Some(lab) = lab(11).await else { return };
    let started = Instant::now();
    let out = lab
        .run(lab.spec(
            &["python3", "-c", "while True: pass"],
            None,
            Duration::from_secs(2),
        ))
        .await;
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    // The CPU rlimit (wall + 1 s) would end it later: the wall clock must be first.
    assert!(took < Duration::from_millis(2800), "took {took:?}");
}

#[tokio::test]
async fn time_sleep_is_killed_at_the_wall_clock() {
    let Some(lab) = lab(12).await else { return };
    let started = Instant::now();
    let out = lab.sh("sleep 60", Duration::from_secs(1)).await;
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert!(took < Duration::from_millis(1800), "took {took:?}");
}

#[tokio::test]
async fn time_stop_kills_a_running_program() {
    let Some(lab) = lab(13).await else { return };
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    let started = Instant::now();
    let (out, ()) = tokio::join!(
        lab.sandbox.run(
            lab.spec(&["sleep", "60"], None, Duration::from_secs(60)),
            &cancel
        ),
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            stopper.cancel();
        }
    );
    let out = out.unwrap();
    assert!(out.cancelled, "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn processes_a_double_forked_grandchild_does_not_survive() {
    let Some(lab) = lab(14).await else { return };
    let marker = format!("grandchild-{}", std::process::id());
    let script = format!(
        "(setsid sh -c 'while :; do date +%s%N > beat; sleep 0.1; done' {marker} </dev/null >/dev/null 2>&1 &); echo started"
    );
    says(
        &lab.sh(&script, Duration::from_secs(10)).await,
        &["started"],
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(processes_with(&marker), Vec::<String>::new());
    let beat = lab.workspace.join("beat");
    let first = std::fs::read_to_string(&beat).unwrap_or_default();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        std::fs::read_to_string(&beat).unwrap_or_default(),
        first,
        "the grandchild still writes"
    );
}

#[tokio::test]
async fn parent_no_docchat_environment_and_no_reach_into_the_service() {
    let Some(lab) = lab(15).await else { return };
    // Under cargo there is always something to leak: CARGO_* (and DOCCHAT_TEST_* from
    // cargo-wt and scripts/test.sh).
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    let pid = std::process::id();
    let out = lab
        .python(&format!(
            "import os\nprint(sorted(k for k in os.environ if k.startswith('DOCCHAT') or 'KEY' in k or 'SECRET' in k or 'TOKEN' in k or k.startswith('CARGO')))\ntry:\n    os.kill({pid}, 0)\n    print('REACHED')\nexcept OSError:\n    print('OUT OF REACH')\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)\n"
        ))
        .await;
    says(&out, &["[]", "OUT OF REACH", "True"]);
}

#[tokio::test]
async fn output_a_flood_is_truncated() {
    let Some(lab) = lab(16).await else { return };
    let out = lab
        .sh(
            "head -c 50000000 /dev/zero | tr '\\0' x; echo; head -c 5000000 /dev/zero >&2",
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(
        out.exit_code,
        Some(0),
        "{:?}",
        (out.exit_code, out.timed_out)
    );
    assert!(
        out.stdout.len() < supervise::CAPTURE_BYTES + 200,
        "{}",
        out.stdout.len()
    );
    assert!(out.stdout.contains("output truncated"));
    assert!(out.stderr.len() < supervise::CAPTURE_BYTES + 200);
}

#[tokio::test]
async fn privileges_none_is_regained() {
    let Some(lab) = lab(17).await else { return };
    let out = lab
        .sh(
            "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb):' /proc/self/status | tr -s '\\t ' ' '",
            Duration::from_secs(10),
        )
        .await;
    says(
        &out,
        &[
            "CapPrm: 0000000000000000",
            "CapEff: 0000000000000000",
            "CapBnd: 0000000000000000",
            "CapAmb: 0000000000000000",
            "NoNewPrivs: 1",
        ],
    );
}

#[tokio::test]
async fn without_a_backend_code_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Err(
        "DOCCHAT_SANDBOX=\"chroot\" is not one of auto, bubblewrap, none".into(),
    ))
    .await;
    assert_eq!(sandbox.status().backend, "unavailable");
    assert!(!sandbox.available());
    let err = sandbox
        .run(
            CodeSpec {
                argv: vec!["true".into()],
                workspace: dir.path().to_path_buf(),
                stdin: None,
                wall_clock: Duration::from_secs(1),
                memory_bytes: None,
                documents: None,
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.contains("code execution is unavailable"), "{err}");
}

#[tokio::test]
async fn none_on_purpose_runs_without_isolation_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Ok(Settings {
        mode: Mode::None,
        dir: dir.path().join("sandbox"),
        slots: 1,
        uid_base: 64390,
    }))
    .await;
    assert_eq!(sandbox.status().backend, "none");
    assert!(sandbox.available());
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let out = sandbox
        .run(
            CodeSpec {
                argv: vec![
                    "sh".into(),
                    "-c".into(),
                    "pwd; test -d /work -o -d /home && echo host-visible; env | grep -c '^DOCCHAT_\\|^CARGO' || true".into(),
                ],
                workspace: workspace.clone(),
                stdin: None,
                wall_clock: Duration::from_secs(10),
                memory_bytes: None,
                documents: None,
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // The host is visible (no isolation), the environment is still cleared.
    says(&out, &[workspace.to_str().unwrap(), "host-visible", "0"]);
}

/// The analyst's runtime (scripts/sandbox-runtime.sh installs Debian's numpy, pandas and
/// matplotlib for /usr/bin/python3, which the sandbox sees read-only under /usr): a CSV is
/// read with pandas and a chart written with matplotlib, inside the workspace.
#[tokio::test]
async fn python_in_the_sandbox_has_numpy_pandas_and_matplotlib() {
    let Some(lab) = lab(18).await else { return };
    std::fs::write(
        lab.workspace.join("sales.csv"),
        "month,total\njan,3\nfeb,5\nmar,8\n",
    )
    .unwrap();
    let out = lab
        .python(
            "import numpy, pandas, matplotlib\n\
             matplotlib.use('Agg')\n\
             import matplotlib.pyplot as plt\n\
             df = pandas.read_csv('sales.csv')\n\
             print('sum', int(numpy.sum(df['total'])))\n\
             df.plot(x='month', y='total').get_figure().savefig('chart.png')\n",
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    says(&out, &["sum 16"]);
    let chart = std::fs::read(lab.workspace.join("chart.png")).unwrap();
    assert!(
        chart.starts_with(b"\x89PNG"),
        "a PNG chart in the workspace"
    );
}
