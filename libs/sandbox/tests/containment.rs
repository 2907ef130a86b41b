//! The sandbox's containment suite (AGENTS.md §2), against every backend this host offers:
//! each case is a module whose tests `bubblewrap` and `landlock` run it on that backend
//! (e.g. `network_dns_fails::landlock`). A backend this host does not offer fails in CI and
//! is a loud skip elsewhere, so CI always shows both ran. Every test sees the failure it
//! guards against: each containment was broken once on purpose and its test went red.
//!
//! Files "outside" belong to the run's slot uid and are open to it by their modes, as the
//! service's own files are to a sandbox that runs as the service's user: only the sandbox
//! (a mount namespace, or Landlock) keeps them out of reach, not the file permissions.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::disallowed_methods
)] // test code: fail loudly; its tasks end with the test's runtime

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use docchat_sandbox::{
    CodeOutput, CodeRunner, CodeSpec, Mode, Sandbox, Settings, UserDisk, supervise,
};
use tokio_util::sync::CancellationToken;

/// The helper binary of this package, for the Landlock backend.
const HELPER: &str = env!("CARGO_BIN_EXE_docchat-sandbox-exec");

/// A sandbox of its own for one test on one backend (its own slot uid, so tests running in
/// parallel never share one), and a directory for the test's files.
struct Lab {
    mode: Mode,
    sandbox: Sandbox,
    dir: tempfile::TempDir,
    workspace: PathBuf,
    /// The run's uid when the tests run as root (one slot: always this uid).
    uid: Option<u32>,
}

/// The lab for test number `n` on the backend `mode`; `None` (a loud skip, a failure in CI)
/// when this host does not offer it.
async fn lab(mode: Mode, n: u32) -> Option<Lab> {
    let dir = tempfile::tempdir().unwrap();
    // Searchable by the slot uid: the helper reaches the workspace by its real path.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let (name, base) = match mode {
        Mode::Bubblewrap => ("bubblewrap", 64300 + n * 4),
        Mode::Landlock => ("landlock", 64600 + n * 4),
        _ => unreachable!("a containment backend"),
    };
    let settings = Settings {
        mode: mode.clone(),
        dir: dir.path().join("sandbox"),
        slots: 1,
        user_slots: 1,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: base,
        helper: Some(HELPER.into()),
    };
    let sandbox = Sandbox::start(Ok(settings)).await;
    let status = sandbox.status();
    if status.backend != name {
        docchat_common::testing::unavailable(&format!(
            "the {name} sandbox ({}: {}; scripts/sandbox-runtime.sh installs bubblewrap, the landlock helper needs a kernel with Landlock)",
            status.backend, status.detail
        ));
        return None;
    }
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let uid = nix::unistd::geteuid().is_root().then_some(base);
    Some(Lab {
        mode,
        sandbox,
        dir,
        workspace,
        uid,
    })
}

/// `async fn name(lab, n) { .. }`: a module `name` with the tests `bubblewrap` and
/// `landlock`, each running the body with a [`Lab`] of that backend (`n` picks the slot
/// uids, unique per test).
macro_rules! sandbox_tests {
    ($($(#[$attr:meta])* async fn $name:ident($lab:ident, $n:literal) $body:block)*) => {
        $(
            $(#[$attr])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn run($lab: Lab) $body

                #[tokio::test]
                async fn bubblewrap() {
                    if let Some(lab) = lab(Mode::Bubblewrap, $n).await {
                        run(lab).await
                    }
                }

                #[tokio::test]
                async fn landlock() {
                    if let Some(lab) = lab(Mode::Landlock, $n).await {
                        run(lab).await
                    }
                }
            }
        )*
    };
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
            user: String::new(),
            disk: UserDisk::default(),
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

    /// Gives `path` to the run's uid (when the tests run as root), so that only the
    /// sandbox stands between the program and it.
    fn give(&self, path: &Path) {
        if let Some(uid) = self.uid {
            std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
        }
    }

    /// The workspace as the program sees it.
    fn home(&self) -> String {
        match self.mode {
            Mode::Bubblewrap => "/workspace".into(),
            _ => self.workspace.canonicalize().unwrap().display().to_string(),
        }
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

sandbox_tests! {
    async fn network_a_listener_on_the_hosts_loopback_is_unreachable(lab, 0) {
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

    async fn network_dns_fails(lab, 1) {
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
try:
    s = socket.socket(socket.AF_INET6 if ':' in '{server}' else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
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

    async fn network_udp_to_the_host_is_lost(lab, 2) {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let out = lab
            .python(&format!(
                "import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    for _ in range(20): s.sendto(b'escape', ('127.0.0.1', {port}))\nexcept OSError:\n    pass\nprint('SENT')\n"
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

    async fn filesystem_a_private_file_outside_is_unreadable(lab, 3) {
        let secret = lab.outside("secret.txt");
        std::fs::write(&secret, "top secret").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        lab.give(&secret);
        let out = lab
            .python(&format!(
                "for p in ['{}', '/etc/shadow', '/root/.bashrc']:\n    try:\n        open(p).read()\n        print('READ', p)\n    except OSError:\n        print('DENIED')\n",
                secret.display()
            ))
            .await;
        says(&out, &["DENIED", "DENIED", "DENIED"]);
    }

    async fn filesystem_writing_outside_the_workspace_fails(lab, 4) {
        // A directory the run's uid owns: its permissions would let the canary in.
        let open_dir = lab.outside("open");
        std::fs::create_dir(&open_dir).unwrap();
        lab.give(&open_dir);
        let canary = open_dir.join("canary");
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

    async fn filesystem_a_symlink_out_of_the_workspace_leads_nowhere(lab, 5) {
        let outside = lab.outside("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("data.txt"), "outside").unwrap();
        lab.give(&outside);
        lab.give(&outside.join("data.txt"));
        std::os::unix::fs::symlink(&outside, lab.workspace.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("data.txt"), lab.workspace.join("file-link"))
            .unwrap();
        let out = lab
            .python(
                "for p in ['link/data.txt', 'file-link']:\n    try:\n        open(p).read()\n        print('READ', p)\n    except OSError:\n        print('DENIED')\ntry:\n    open('link/new.txt', 'w').write('x')\n    print('WROTE')\nexcept OSError:\n    print('DENIED')\n",
            )
            .await;
        says(&out, &["DENIED", "DENIED", "DENIED"]);
        assert!(!outside.join("new.txt").exists());
    }

    async fn filesystem_dotdot_reaches_only_the_sandboxs_root(lab, 6) {
        let beside = lab.outside("beside.txt");
        std::fs::write(&beside, "beside").unwrap();
        lab.give(&beside);
        // Listing the parents: bubblewrap shows its own small root, Landlock refuses.
        let out = lab
            .python(
                "import os\ntry:\n    open('../beside.txt').read()\n    print('READ')\nexcept OSError:\n    print('DENIED')\ntry:\n    print(sorted(set(os.listdir('../..')) & {'home', 'root', 'var', 'work', 'opt', 'srv'}))\nexcept OSError:\n    print([])\n",
            )
            .await;
        says(&out, &["DENIED", "[]"]);
    }

    async fn filesystem_the_workspace_is_readable_and_writable(lab, 7) {
        std::fs::write(lab.workspace.join("given.txt"), "from the service").unwrap();
        let out = lab
            .python(
                "import os, tempfile\nprint(os.getcwd())\nprint(os.environ['HOME'] == os.getcwd())\nprint(open('given.txt').read())\nos.makedirs('out/deep', exist_ok=True)\nopen('out/deep/result.txt', 'w').write('from the sandbox')\np = os.path.join(tempfile.gettempdir(), 'scratch')\nopen(p, 'w').write('tmp works')\nprint(open(p).read())\n",
            )
            .await;
        says(
            &out,
            &[&lab.home(), "True", "from the service", "tmp works"],
        );
        assert_eq!(
            std::fs::read_to_string(lab.workspace.join("out/deep/result.txt")).unwrap(),
            "from the sandbox"
        );
    }

    async fn processes_a_fork_bomb_ends_on_time_and_leaves_nothing(lab, 8) {
        let marker = format!("forkbomb-{}-{:?}", std::process::id(), lab.mode);
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
        // Nothing of it left: the pid namespace died with the run, the slot uid was swept.
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

    async fn processes_are_capped_per_run(lab, 9) {
        let out = lab
            .python(
                "import subprocess\nps = []\ntry:\n    for _ in range(200):\n        ps.append(subprocess.Popen(['sleep', '5']))\nexcept OSError:\n    pass\nprint(len(ps) < 100)\nfor p in ps: p.kill()\n",
            )
            .await;
        says(&out, &["True"]);
    }

    async fn memory_two_gib_under_a_256_mib_cap_is_refused(lab, 10) {
        let mut spec = lab.spec(
            &["python3", "-"],
            Some("try:\n    b = bytearray(2 << 30)\n    print('ALLOCATED')\nexcept MemoryError:\n    print('REFUSED')\n"),
            Duration::from_secs(20),
        );
        spec.memory_bytes = Some(256 << 20);
        says(&lab.run(spec).await, &["REFUSED"]);
    }

    async fn time_a_busy_loop_is_killed_at_the_wall_clock(lab, 11) {
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

    async fn time_sleep_is_killed_at_the_wall_clock(lab, 12) {
        let started = Instant::now();
        let out = lab.sh("sleep 60", Duration::from_secs(1)).await;
        let took = started.elapsed();
        assert!(out.timed_out, "{out:?}");
        assert!(took < Duration::from_millis(1800), "took {took:?}");
    }

    async fn time_stop_kills_a_running_program(lab, 13) {
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

    async fn processes_a_double_forked_grandchild_does_not_survive(lab, 14) {
        let marker = format!("grandchild-{}-{:?}", std::process::id(), lab.mode);
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

    async fn parent_no_docchat_environment_and_no_reach_into_the_service(lab, 15) {
        // Under cargo there is always something to leak: CARGO_* (and DOCCHAT_TEST_* from
        // cargo-wt and scripts/test.sh).
        assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
        let pid = std::process::id();
        let out = lab
            .python(&format!(
                "import os\nprint(sorted(k for k in os.environ if k.startswith('DOCCHAT') or 'KEY' in k or 'SECRET' in k or 'TOKEN' in k or k.startswith('CARGO')))\ntry:\n    os.kill({pid}, 0)\n    print('REACHED')\nexcept OSError:\n    print('OUT OF REACH')\ntry:\n    open('/proc/{pid}/environ', 'rb').read()\n    print('READ')\nexcept OSError:\n    print('DENIED')\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)\n"
            ))
            .await;
        // Only bubblewrap has a pid namespace: under Landlock the process list is the
        // host's, each process out of reach.
        let few = if lab.mode == Mode::Bubblewrap { "True" } else { "False" };
        says(&out, &["[]", "OUT OF REACH", "DENIED", few]);
    }

    /// A process of the run's own uid that is not the run's (as the service is to a sandbox
    /// that runs as the service's user): neither signals nor its `/proc` reach it.
    async fn parent_a_process_of_the_same_uid_outside_is_out_of_reach(lab, 16) {
        use std::os::unix::process::CommandExt;
        let mut victim = std::process::Command::new("sleep");
        victim.arg("30").env("DOCCHAT_VICTIM_SECRET", "s3cret");
        if let Some(uid) = lab.uid {
            victim.uid(uid).gid(uid);
        }
        let mut victim = victim.spawn().unwrap();
        let pid = victim.id();
        let out = lab
            .python(&format!(
                "import os\nfor sig in (0, 9):\n    try:\n        os.kill({pid}, sig)\n        print('SIGNALLED')\n    except OSError:\n        print('OUT OF REACH')\nfor f in ('environ', 'mem'):\n    try:\n        print('READ', b's3cret' in open('/proc/{pid}/' + f, 'rb').read(4096))\n    except OSError:\n        print('DENIED')\n"
            ))
            .await;
        says(
            &out,
            &["OUT OF REACH", "OUT OF REACH", "DENIED", "DENIED"],
        );
        let _ = victim.kill();
        let _ = victim.wait();
    }

    /// An abstract Unix socket (no file, no permissions: the kind a same-uid sandbox could
    /// otherwise reach) opened outside is not reachable from inside.
    async fn parent_an_abstract_unix_socket_outside_is_unreachable(lab, 17) {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("docchat-test-{}-{:?}", std::process::id(), lab.mode);
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
        let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let out = lab
            .python(&format!(
                "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ntry:\n    s.connect('\\0{name}')\n    print('CONNECTED')\nexcept OSError:\n    print('BLOCKED')\n"
            ))
            .await;
        says(&out, &["BLOCKED"]);
        assert!(listener.accept().is_err(), "the listener saw a connection");
    }

    async fn output_a_flood_is_truncated(lab, 18) {
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
            (out.exit_code, out.timed_out, &out.stderr)
        );
        assert!(
            out.stdout.len() < supervise::CAPTURE_BYTES + 200,
            "{}",
            out.stdout.len()
        );
        assert!(out.stdout.contains("output truncated"));
        assert!(out.stderr.len() < supervise::CAPTURE_BYTES + 200);
    }

    async fn privileges_none_is_regained(lab, 19) {
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

    /// Kernel interfaces the helper's seccomp filter closes answer EPERM (a clean error, not
    /// a kill); under bubblewrap ptrace and mount fail for want of privilege.
    async fn privileges_namespaces_mounts_and_ptrace_are_refused(lab, 20) {
        let out = lab
            .python(
                "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nfor name, call in [('unshare', lambda: libc.unshare(0x10000000)), ('ptrace', lambda: libc.ptrace(16, os.getppid(), 0, 0)), ('mount', lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)), ('chroot', lambda: libc.chroot(b'/'))]:\n    r = call()\n    print(name, 'REFUSED' if r == -1 and ctypes.get_errno() in (1, 13) else ('OK', r, ctypes.get_errno()))\n",
            )
            .await;
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        if lab.mode == Mode::Bubblewrap {
            // bubblewrap as root leaves unprivileged user namespaces to the host's setting,
            // so unshare(CLONE_NEWUSER) (and chroot inside it) may work there, confined to
            // its namespaces; ARCHITECTURE §7 records it.
            assert_eq!(lines[1..3], ["ptrace REFUSED", "mount REFUSED"], "{out:?}");
        } else {
            assert_eq!(
                lines,
                ["unshare REFUSED", "ptrace REFUSED", "mount REFUSED", "chroot REFUSED"],
                "{out:?}"
            );
        }
    }

    /// The session collection's documents: readable where the sandbox says they are, not
    /// writable (they belong to the run's uid here, so only the sandbox stops the write).
    async fn filesystem_the_documents_are_readable_not_writable(lab, 22) {
        let docs = lab.outside("shelf");
        std::fs::create_dir(&docs).unwrap();
        std::fs::write(docs.join("report.txt"), "quarterly").unwrap();
        lab.give(&docs);
        lab.give(&docs.join("report.txt"));
        let at = lab.sandbox.documents_at(&docs);
        let mut spec = lab.spec(
            &["python3", "-"],
            Some(&format!(
                "import os\nd = '{}'\nprint(sorted(os.listdir(d)))\nprint(open(os.path.join(d, 'report.txt')).read())\nfor p in ['report.txt', 'new.txt']:\n    try:\n        open(os.path.join(d, p), 'a').write('x')\n        print('WROTE', p)\n    except OSError:\n        print('DENIED')\n",
                at.display()
            )),
            Duration::from_secs(20),
        );
        spec.documents = Some(docs.clone());
        says(
            &lab.run(spec).await,
            &["['report.txt']", "quarterly", "DENIED", "DENIED"],
        );
        assert_eq!(std::fs::read_to_string(docs.join("report.txt")).unwrap(), "quarterly");
        assert!(!docs.join("new.txt").exists());
    }

    /// The analyst's runtime (scripts/sandbox-runtime.sh installs Debian's numpy, pandas and
    /// matplotlib for /usr/bin/python3, which the sandbox reads from /usr): a CSV is read
    /// with pandas and a chart written with matplotlib, inside the workspace.
    async fn python_in_the_sandbox_has_numpy_pandas_and_matplotlib(lab, 21) {
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
}

#[tokio::test]
async fn without_a_backend_code_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Err(
        "DOCCHAT_SANDBOX=\"chroot\" is not one of auto, bubblewrap, landlock, none".into(),
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
                user: String::new(),
                disk: UserDisk::default(),
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
        user_slots: 1,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: 64390,
        helper: None,
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
                user: String::new(),
                disk: UserDisk::default(),
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // The host is visible (no isolation), the environment is still cleared.
    says(&out, &[workspace.to_str().unwrap(), "host-visible", "0"]);
}

#[tokio::test]
async fn landlock_without_its_helper_is_unavailable_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Ok(Settings {
        mode: Mode::Landlock,
        dir: dir.path().join("sandbox"),
        slots: 1,
        user_slots: 1,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: 64395,
        helper: Some(dir.path().join("no-such-helper")),
    }))
    .await;
    let status = sandbox.status();
    assert_eq!(status.backend, "unavailable");
    assert!(status.detail.starts_with("landlock: "), "{status:?}");
    assert!(status.detail.contains("no-such-helper"), "{status:?}");
    assert!(!status.isolated());
}

/// `auto` takes bubblewrap where it works (this host), and readiness counts it as isolated.
#[tokio::test]
async fn auto_prefers_bubblewrap() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(Ok(Settings {
        mode: Mode::Auto,
        dir: dir.path().join("sandbox"),
        slots: 1,
        user_slots: 1,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: 64396,
        helper: Some(HELPER.into()),
    }))
    .await;
    let status = sandbox.status();
    if status.backend != "bubblewrap" {
        docchat_common::testing::unavailable(&format!("the bubblewrap sandbox ({status:?})"));
        return;
    }
    assert!(status.isolated());
}
