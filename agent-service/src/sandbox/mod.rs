//! The code sandbox: the [`CodeRunner`] behind the python and shell tools (ARCHITECTURE.md
//! §7 "Sandbox"). One backend is chosen when the service starts, by probing this host:
//!
//! - **bubblewrap** ([`bwrap`]): namespaces, a read-only system, the workspace as the only
//!   writable place (besides a small tmpfs), no network;
//! - the **Landlock + seccomp helper** of docs/ARCHITECTURE.md is not built yet: where
//!   bubblewrap does not work the probe says so and code tools are refused;
//! - **none**, only when an administrator sets `DOCCHAT_SANDBOX=none`: programs run on the
//!   host with the limits but without isolation, said loudly at start and on every run.
//!
//! Every backend applies the rlimits of [`limits`], runs as a slot uid when the service is
//! root, and is supervised by [`supervise`] (wall clock, cancellation, bounded output).
//!
//! Settings (environment): `DOCCHAT_SANDBOX` = `auto` (default) | `bubblewrap` | `none`;
//! `DOCCHAT_SANDBOX_SLOTS` (runs at once, default 16); `DOCCHAT_SANDBOX_UID_BASE` (first
//! slot uid when root, default 64200).

pub mod bwrap;
pub mod limits;
pub mod supervise;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::tools::{CodeOutput, CodeRunner, CodeSpec};
use bwrap::Bwrap;
use limits::{Limits, Slots};

/// How the administrator asked the backend to be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The first backend that works here.
    Auto,
    /// bubblewrap or nothing.
    Bubblewrap,
    /// No isolation, on purpose.
    None,
}

/// The sandbox's settings, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// Where the sandbox keeps its files (`/etc` files, the probe's workspace).
    pub dir: PathBuf,
    pub slots: u32,
    pub uid_base: u32,
}

impl Settings {
    /// From `DOCCHAT_SANDBOX*`; an unknown mode is an error.
    pub fn from_env(dir: PathBuf) -> Result<Settings, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let mode = match var("DOCCHAT_SANDBOX")
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("auto") => Mode::Auto,
            Some("bubblewrap" | "bwrap") => Mode::Bubblewrap,
            Some("none") => Mode::None,
            Some(other) => {
                return Err(format!(
                    "DOCCHAT_SANDBOX={other:?} is not one of auto, bubblewrap, none"
                ));
            }
        };
        let number = |k: &str, default: u32| match var(k) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("{k}={v:?} is not a number")),
        };
        Ok(Settings {
            mode,
            dir,
            slots: number("DOCCHAT_SANDBOX_SLOTS", 16)?.clamp(1, 1024),
            uid_base: number("DOCCHAT_SANDBOX_UID_BASE", 64200)?.max(1000),
        })
    }
}

enum Backend {
    Bubblewrap(Bwrap),
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
    /// `bubblewrap`, `none` (no isolation, on purpose) or `unavailable`.
    pub backend: &'static str,
    /// Why, when unavailable; how runs are isolated otherwise.
    pub detail: String,
}

/// The sandbox of one replica; see the module documentation.
pub struct Sandbox {
    backend: Backend,
    slots: Slots,
}

impl Sandbox {
    /// Probes this host and chooses the backend, logging what it chose and why.
    pub async fn start(settings: Result<Settings, String>) -> Sandbox {
        let sandbox = match settings {
            Ok(s) => Sandbox::probe(s).await,
            Err(e) => Sandbox {
                backend: Backend::Unavailable(e),
                slots: Slots::new(0, 1, false),
            },
        };
        let status = sandbox.status();
        match &sandbox.backend {
            Backend::Bubblewrap(_) => {
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
        let slots = Slots::new(settings.uid_base, settings.slots, root);
        let uids = settings.uid_base..settings.uid_base.saturating_add(settings.slots);
        let unavailable = |why: String| Sandbox {
            backend: Backend::Unavailable(why),
            slots: Slots::new(0, 1, false),
        };
        if let Err(e) = prepare_dir(&settings.dir, uids) {
            return unavailable(format!("cannot prepare {}: {e}", settings.dir.display()));
        }
        if settings.mode == Mode::None {
            let (Some(prlimit), Some(setpriv)) = (bwrap::which("prlimit"), bwrap::which("setpriv"))
            else {
                return unavailable("prlimit and setpriv (util-linux) are not installed".into());
            };
            return Sandbox {
                backend: Backend::Unconfined { prlimit, setpriv },
                slots,
            };
        }
        let bwrap = match Bwrap::find(settings.dir.join("etc")) {
            Ok(b) => b,
            Err(why) => return unavailable(not_here(&why)),
        };
        let sandbox = Sandbox {
            backend: Backend::Bubblewrap(bwrap),
            slots,
        };
        // The real thing, once: a program writes and reads a file in its workspace.
        let workspace = settings.dir.join("probe");
        let _ = std::fs::remove_dir_all(&workspace);
        if let Err(e) = std::fs::create_dir_all(&workspace) {
            return unavailable(format!("cannot create {}: {e}", workspace.display()));
        }
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
        };
        match sandbox.run(spec, &CancellationToken::new()).await {
            Ok(out) if out.exit_code == Some(0) && out.stdout.trim() == "ok" => sandbox,
            Ok(out) => unavailable(not_here(&format!(
                "bubblewrap does not work here (exit {:?}): {}",
                out.exit_code,
                out.stderr.trim()
            ))),
            Err(e) => unavailable(not_here(&e)),
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

    /// The command for `spec` on this backend, as `uid`.
    fn command(&self, spec: &CodeSpec, uid: Option<u32>) -> Result<Command, String> {
        let limits = Limits::for_spec(spec);
        match &self.backend {
            Backend::Bubblewrap(b) => {
                let mut cmd = Command::new(b.program());
                cmd.args(b.args(spec, &limits, uid)).env_clear();
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

/// The reason no backend works, with what else was tried.
fn not_here(bwrap: &str) -> String {
    format!("{bwrap}; the Landlock + seccomp backend is not built yet")
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
        if let Backend::Unavailable(why) = &self.backend {
            return Err(format!("code execution is unavailable: {why}"));
        }
        if spec.argv.is_empty() {
            return Err("nothing to run".into());
        }
        let slot = tokio::select! {
            slot = self.slots.acquire() => slot.ok_or("the sandbox is shutting down")?,
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
        let cmd = self.command(&spec, slot.uid)?;
        let result = supervise::run(cmd, spec.stdin.clone(), spec.wall_clock, cancel).await;
        if let Some(uid) = slot.uid {
            supervise::sweep(uid).await;
        }
        drop(slot);
        result.map_err(|e| {
            tracing::warn!(error = %e, "the sandbox did not start");
            format!("the sandbox did not start: {e}")
        })
    }

    fn available(&self) -> bool {
        !matches!(self.backend, Backend::Unavailable(_))
    }

    fn documents_at(&self, host: &Path) -> PathBuf {
        match self.backend {
            Backend::Bubblewrap(_) => PathBuf::from(crate::tools::DOCUMENTS_MOUNT),
            // No mount namespace: the program sees the host's path.
            _ => host.to_path_buf(),
        }
    }
}
