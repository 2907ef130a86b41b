//! docchat's code sandbox: the [`CodeRunner`] behind agent-service's python and shell tools,
//! custom code tools, local MCP servers and browser actions (docs/AGENT.md, "Sandbox"). A
//! crate of its own so that the helper program `docchat-sandbox-exec`, which starts as
//! root in some deployments, links only this crate's few dependencies. One backend is chosen when the service starts, by probing this host:
//!
//! - **bubblewrap** ([`bwrap`]): namespaces, a read-only system, the workspace as the only
//!   writable place (besides a small tmpfs), no network;
//! - **landlock** ([`helper`] on the service's side, [`exec`] the helper program
//!   `docchat-sandbox-exec`): where namespaces cannot be created (a Kubernetes pod under the
//!   runtime's default seccomp profile), a helper confines itself with Landlock (read-only
//!   system, the workspace and a private tmp writable, no TCP, signals and abstract sockets
//!   scoped), a seccomp filter (no socket but AF_UNIX, no ptrace, mount, namespaces, ...)
//!   and the rlimits, then `execve`s the program;
//! - **none**, only when an administrator sets `DOCCHAT_SANDBOX=none`: programs run on the
//!   host with the limits but without isolation, said loudly at start and on every run.
//!
//! `auto` takes bubblewrap when its probe (a program writes and reads a file in a
//! workspace) passes, else the helper when the same probe passes, else none is available
//! and the reasons of both are reported (log and readiness); code tools are then refused.
//!
//! Every backend applies the rlimits of [`limits`], runs as a slot uid when the service is
//! root, and is supervised by [`supervise`] (wall clock, cancellation, bounded output).
//!
//! Slots are shared fairly ([`fair`]): one user holds at most its share of them at once, a
//! freed slot goes to the waiting user holding the fewest, and one code run holds its slot at
//! most `DOCCHAT_SANDBOX_MAX_RUN_SECONDS` whatever the run's own timeout says.
//!
//! [`Settings`] come from agent-service's configuration: `DOCCHAT_SANDBOX` = `auto` (default) | `bubblewrap` |
//! `landlock` (alias `helper`) | `none`; `DOCCHAT_SANDBOX_SLOTS` (runs at once on this
//! replica, default 16); `DOCCHAT_SANDBOX_USER_SLOTS` (runs of one user at once, default a
//! quarter of the slots, at least one); `DOCCHAT_SANDBOX_MAX_RUN_SECONDS` (the longest one
//! code run may hold a slot, default 900); `DOCCHAT_SANDBOX_UID_BASE` (first slot uid when
//! root, default 64200);
//! `DOCCHAT_SANDBOX_HELPER` (the helper's path, default: next to the service's binary).

pub mod bwrap;
pub mod exec;
pub mod fair;
pub mod helper;
pub mod limits;
pub mod quota;
pub mod stdio;
pub mod supervise;

mod runner;
#[cfg(feature = "testing")]
pub mod testing;

pub use runner::{
    CodeOutput, CodeRunner, CodeSpec, DOCUMENTS_MOUNT, Grants, NoSandbox, OverQuota, Pipes,
    UserDisk,
};

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use bwrap::Bwrap;
use helper::{Helper, Invocation};
use limits::{Limits, Slots};

/// How the administrator asked the backend to be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The first backend that works here.
    Auto,
    /// bubblewrap or nothing.
    Bubblewrap,
    /// The Landlock + seccomp helper or nothing.
    Landlock,
    /// No isolation, on purpose.
    None,
}

impl Mode {
    /// `auto`, `bubblewrap` (or `bwrap`), `landlock` (or `helper`) or `none`, in any case.
    pub fn parse(name: &str) -> Result<Mode, String> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Mode::Auto),
            "bubblewrap" | "bwrap" => Ok(Mode::Bubblewrap),
            "landlock" | "helper" => Ok(Mode::Landlock),
            "none" => Ok(Mode::None),
            other => Err(format!(
                "DOCCHAT_SANDBOX={other:?} is not one of auto, bubblewrap, landlock, none"
            )),
        }
    }
}

/// The sandbox's settings (agent-service reads them from its `Config`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// Where the sandbox keeps its files (`/etc` files, the probe's workspace).
    pub dir: PathBuf,
    pub slots: u32,
    /// Slots one user may hold at once.
    pub user_slots: u32,
    /// The longest one code run holds a slot (a stdio server's lifetime is its own).
    pub max_run: Duration,
    /// Bytes one workspace may hold (`DOCCHAT_WORKSPACE_QUOTA_MB`, [`quota`]).
    pub workspace_quota: u64,
    pub uid_base: u32,
    /// The helper program; `None`: `docchat-sandbox-exec` next to the running binary.
    pub helper: Option<PathBuf>,
}

enum Backend {
    Bubblewrap(Bwrap),
    Landlock(Helper),
    /// DOCCHAT_SANDBOX=none.
    Unconfined {
        prlimit: PathBuf,
        setpriv: PathBuf,
    },
    Unavailable(String),
}

/// What the probe found: the log line, readiness and whether code tools are offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// `bubblewrap`, `landlock`, `none` (no isolation, on purpose) or `unavailable`.
    pub backend: &'static str,
    /// Why, when unavailable; how runs are isolated otherwise.
    pub detail: String,
}

impl Status {
    /// Whether code runs isolated (the sandbox's readiness).
    pub fn isolated(&self) -> bool {
        matches!(self.backend, "bubblewrap" | "landlock")
    }
}

/// The sandbox of one replica; see the module documentation.
pub struct Sandbox {
    backend: Backend,
    slots: Slots,
    max_run: Duration,
    workspace_quota: u64,
}

impl Sandbox {
    /// Probes this host and chooses the backend, logging what it chose and why.
    pub async fn start(settings: Result<Settings, String>) -> Sandbox {
        let sandbox = match settings {
            Ok(s) => Sandbox::probe(s).await,
            Err(e) => Sandbox {
                backend: Backend::Unavailable(e),
                slots: Slots::new(0, 1, 1, false),
                max_run: Duration::ZERO,
                workspace_quota: 0,
            },
        };
        let status = sandbox.status();
        match &sandbox.backend {
            Backend::Bubblewrap(_) | Backend::Landlock(_) => {
                tracing::info!(backend = status.backend, detail = %status.detail, "code sandbox ready");
            }
            Backend::Unconfined { .. } => tracing::error!(
                backend = status.backend,
                detail = %status.detail,
                "DOCCHAT_SANDBOX=none: code the agent writes runs on this host WITHOUT isolation"
            ),
            Backend::Unavailable(why) => tracing::error!(
                reason = %why,
                "no code sandbox works on this host: python and shell tools are refused"
            ),
        }
        sandbox
    }

    async fn probe(settings: Settings) -> Sandbox {
        let root = nix::unistd::geteuid().is_root();
        let uids = settings.uid_base..settings.uid_base.saturating_add(settings.slots);
        let unavailable = |why: String| Sandbox {
            backend: Backend::Unavailable(why),
            slots: Slots::new(0, 1, 1, false),
            max_run: Duration::ZERO,
            workspace_quota: 0,
        };
        if let Err(e) = prepare_dir(&settings.dir, uids) {
            return unavailable(format!("cannot prepare {}: {e}", settings.dir.display()));
        }
        let with = |backend: Backend| Sandbox {
            backend,
            slots: Slots::new(settings.uid_base, settings.slots, settings.user_slots, root),
            max_run: settings.max_run,
            workspace_quota: settings.workspace_quota,
        };
        if settings.mode == Mode::None {
            let (Some(prlimit), Some(setpriv)) = (bwrap::which("prlimit"), bwrap::which("setpriv"))
            else {
                return unavailable("prlimit and setpriv (util-linux) are not installed".into());
            };
            return with(Backend::Unconfined { prlimit, setpriv });
        }
        let bubblewrap = || async {
            let b = Bwrap::find(settings.dir.join("etc"))?;
            with(Backend::Bubblewrap(b)).works(&settings.dir).await
        };
        let landlock = || async {
            let h = Helper::find(settings.helper.as_deref(), settings.dir.join("tmp"))?;
            with(Backend::Landlock(h)).works(&settings.dir).await
        };
        match settings.mode {
            Mode::Bubblewrap => bubblewrap()
                .await
                .unwrap_or_else(|e| unavailable(format!("bubblewrap: {e}"))),
            Mode::Landlock => landlock()
                .await
                .unwrap_or_else(|e| unavailable(format!("landlock: {e}"))),
            Mode::Auto | Mode::None => match bubblewrap().await {
                Ok(sandbox) => sandbox,
                Err(no_bwrap) => match landlock().await {
                    Ok(sandbox) => {
                        tracing::info!(reason = %no_bwrap, "bubblewrap does not work here: using the Landlock helper");
                        sandbox
                    }
                    Err(no_helper) => {
                        unavailable(format!("bubblewrap: {no_bwrap}; landlock: {no_helper}"))
                    }
                },
            },
        }
    }

    /// This sandbox when the real thing works once: a program writes and reads a file in a
    /// workspace (under `dir`).
    async fn works(self, dir: &Path) -> Result<Sandbox, String> {
        let workspace = dir.join("probe");
        let _ = std::fs::remove_dir_all(&workspace);
        std::fs::create_dir_all(&workspace)
            .map_err(|e| format!("cannot create {}: {e}", workspace.display()))?;
        let spec = CodeSpec {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "echo ok >probe && cat probe".into(),
            ],
            workspace,
            stdin: None,
            wall_clock: Duration::from_secs(10),
            memory_bytes: None,
            documents: None,
            user: String::new(),
            disk: crate::UserDisk::default(),
        };
        match self.run(spec, &CancellationToken::new()).await {
            Ok(out) if out.exit_code == Some(0) && out.stdout.trim() == "ok" => Ok(self),
            Ok(out) => Err(format!(
                "it does not work here (exit {:?}): {}",
                out.exit_code,
                out.stderr.trim()
            )),
            Err(e) => Err(e),
        }
    }

    pub fn status(&self) -> Status {
        let who = if self.slots.switches() {
            "each run as its own unprivileged uid"
        } else {
            "as the service's user"
        };
        match &self.backend {
            Backend::Bubblewrap(_) => Status {
                backend: "bubblewrap",
                detail: format!("namespaces, no network, read-only system, rlimits; {who}"),
            },
            Backend::Landlock(_) => Status {
                backend: "landlock",
                detail: format!(
                    "Landlock + seccomp helper: no network, read-only system, the workspace and a private tmp writable, signals and abstract sockets scoped, rlimits; {who}{}",
                    if self.slots.switches() {
                        ""
                    } else {
                        " (processes that leave the run's process group are not swept)"
                    }
                ),
            },
            Backend::Unconfined { .. } => Status {
                backend: "none",
                detail: format!("DOCCHAT_SANDBOX=none: no isolation, rlimits only; {who}"),
            },
            Backend::Unavailable(why) => Status {
                backend: "unavailable",
                detail: why.clone(),
            },
        }
    }

    /// The command for `spec` on this backend, as `uid`, with `tmp` as the run's private
    /// temporary directory (the helper backend's), whose files may not grow past `room`
    /// bytes each (what is left of the workspace's quota).
    fn command(
        &self,
        spec: &CodeSpec,
        grants: &Grants,
        uid: Option<u32>,
        tmp: Option<&Path>,
        room: u64,
    ) -> Result<Command, String> {
        let mut limits = Limits::for_spec(spec).granting(grants);
        limits.file_size = limits.file_size.min(room);
        match &self.backend {
            Backend::Bubblewrap(b) => {
                let mut cmd = Command::new(b.program());
                cmd.args(b.args(spec, &limits, uid)).env_clear();
                Ok(cmd)
            }
            Backend::Landlock(h) => {
                let workspace = std::path::absolute(&spec.workspace)
                    .map_err(|e| format!("the workspace: {e}"))?;
                let invocation = Invocation {
                    uid,
                    workspace,
                    tmp: tmp.ok_or("no private tmp")?.to_path_buf(),
                    documents: spec
                        .documents
                        .as_deref()
                        .map(std::path::absolute)
                        .transpose()
                        .map_err(|e| format!("the documents: {e}"))?,
                    limits,
                    argv: spec.argv.iter().map(OsString::from).collect(),
                };
                let mut cmd = Command::new(h.program());
                cmd.args(invocation.to_args()).env_clear();
                Ok(cmd)
            }
            Backend::Unconfined { prlimit, setpriv } => {
                tracing::warn!(argv0 = ?spec.argv.first(), "running agent code WITHOUT a sandbox (DOCCHAT_SANDBOX=none)");
                let mut argv: Vec<String> = Vec::new();
                if let Some(uid) = uid {
                    argv.extend([
                        setpriv.display().to_string(),
                        format!("--reuid={uid}"),
                        format!("--regid={uid}"),
                        "--clear-groups".into(),
                        "--inh-caps=-all".into(),
                        "--no-new-privs".into(),
                        "--".into(),
                    ]);
                }
                argv.extend(limits.prlimit(prlimit));
                argv.extend(spec.argv.iter().cloned());
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .env_clear()
                    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                    .env("HOME", &spec.workspace)
                    .env("LANG", "C.UTF-8")
                    .current_dir(&spec.workspace);
                Ok(cmd)
            }
            Backend::Unavailable(why) => Err(format!("code execution is unavailable: {why}")),
        }
    }
}

/// The sandbox's whole environment, for a program whose home is `home` and whose temporary
/// directory is `tmp` (`/workspace` and `/tmp` inside bubblewrap, the real paths for the
/// helper).
pub(crate) fn environment(home: &Path, tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("USER", "sandbox"),
        ("LANG", "C.UTF-8"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUNBUFFERED", "1"),
        ("MPLBACKEND", "Agg"),
        // Threads count against the process limit: keep BLAS pools small.
        ("OPENBLAS_NUM_THREADS", "4"),
        ("OMP_NUM_THREADS", "4"),
        ("MKL_NUM_THREADS", "4"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect();
    env.push(("HOME".into(), home.into()));
    env.push(("TMPDIR".into(), tmp.into()));
    env.push(("MPLCONFIGDIR".into(), tmp.join("matplotlib").into()));
    env
}

/// The sandbox's directory: searchable by the slot uids, with our `/etc` files.
fn prepare_dir(dir: &Path, uids: std::ops::Range<u32>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    bwrap::write_etc(&dir.join("etc"), uids)
}

/// Makes `uid` the owner of the workspace and everything in it (files the service wrote, or
/// another slot's), without following links.
fn hand_over(workspace: &Path, uid: u32) -> std::io::Result<()> {
    let mut stack = vec![workspace.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = p.symlink_metadata()?;
        if std::os::unix::fs::MetadataExt::uid(&meta) != uid
            || std::os::unix::fs::MetadataExt::gid(&meta) != uid
        {
            std::os::unix::fs::lchown(&p, Some(uid), Some(uid))?;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl CodeRunner for Sandbox {
    async fn run(&self, spec: CodeSpec, cancel: &CancellationToken) -> Result<CodeOutput, String> {
        self.run_with(spec, &Grants::default(), cancel).await
    }

    async fn run_with(
        &self,
        spec: CodeSpec,
        grants: &Grants,
        cancel: &CancellationToken,
    ) -> Result<CodeOutput, String> {
        let requested = std::time::Instant::now();
        if let Backend::Unavailable(why) = &self.backend {
            return Err(format!("code execution is unavailable: {why}"));
        }
        if spec.argv.is_empty() {
            return Err("nothing to run".into());
        }
        let mut spec = spec;
        if spec.wall_clock > self.max_run {
            // One call holds a slot this long at most, whatever its own timeout says.
            spec.wall_clock = self.max_run;
        }
        let slot = tokio::select! {
            slot = self.slots.acquire(&spec.user) => slot,
            () = cancel.cancelled() => return Ok(CodeOutput { cancelled: true, ..CodeOutput::default() }),
        };
        if let Some(uid) = slot.uid {
            let workspace = spec.workspace.clone();
            tokio::task::spawn_blocking(move || hand_over(&workspace, uid))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
                .map_err(|e| format!("cannot prepare the workspace: {e}"))?;
        }
        let tmp = match &self.backend {
            Backend::Landlock(h) => Some(
                h.private_tmp(slot.uid)
                    .map_err(|e| format!("cannot prepare the run's tmp: {e}"))?,
            ),
            _ => None,
        };
        // The helper makes its own session (setsid), which a process group leader cannot.
        let group = if matches!(self.backend, Backend::Landlock(_)) {
            supervise::Group::OwnSession
        } else {
            supervise::Group::New
        };
        // The disk quotas: no file may outgrow what is left, and the workspace is watched.
        let watch = quota::Watch::new(
            spec.workspace.clone(),
            self.workspace_quota,
            spec.disk.clone(),
        );
        let room = watch.room().await;
        let started_after = requested.elapsed();
        let result = match self.command(&spec, grants, slot.uid, tmp.as_deref(), room) {
            Ok(cmd) => supervise::run(
                cmd,
                group,
                spec.stdin.clone(),
                spec.wall_clock,
                Some(&watch),
                cancel,
            )
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "the sandbox did not start");
                format!("the sandbox did not start: {e}")
            }),
            Err(e) => Err(e),
        };
        if let Some(uid) = slot.uid {
            supervise::sweep(uid).await;
        }
        if let Some(tmp) = tmp {
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(tmp)).await;
        }
        drop(slot);
        // Past the quota between two measurements, or full (a file cut at what was left):
        // said, not left to a bare "File size limit exceeded".
        let mut result = result;
        if let Ok(out) = &mut result {
            out.started_after = Some(started_after);
            if out.over_quota.is_none() {
                out.over_quota = watch.exceeded(true).await;
            }
        }
        result
    }

    fn available(&self) -> bool {
        !matches!(self.backend, Backend::Unavailable(_))
    }

    fn private_network(&self) -> bool {
        matches!(self.backend, Backend::Bubblewrap(_))
    }

    fn load(&self) -> Option<(&'static str, fair::Load)> {
        Some((self.status().backend, self.slots.load()))
    }

    async fn serve(
        &self,
        spec: CodeSpec,
        started: tokio::sync::oneshot::Sender<Result<crate::Pipes, String>>,
        cancel: CancellationToken,
    ) {
        self.serve_stdio(spec, started, cancel).await;
    }

    fn documents_at(&self, host: &Path) -> PathBuf {
        match self.backend {
            Backend::Bubblewrap(_) => PathBuf::from(crate::DOCUMENTS_MOUNT),
            // No mount namespace: the program sees the host's path.
            _ => host.to_path_buf(),
        }
    }
}
