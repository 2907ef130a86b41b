//! Long-lived sandboxed programs with piped stdin and stdout (local MCP servers): the same
//! confinement as a code run (slot uid, workspace read-write, `spec.documents` read-only,
//! rlimits, its own process group or session), built by [`Sandbox::command`] for every
//! backend, but the caller talks to the program while it lives instead of reading its
//! output at the end. Whatever the program leaves when it ends, when its lifetime
//! (`spec.wall_clock`) is over, when its workspace passes a disk quota (sandbox/quota.rs;
//! its stderr tail says so) or when the caller cancels is killed, and the slot is given
//! back only then.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::quota::Watch;
use super::{Backend, Sandbox, hand_over, supervise};
use crate::{CodeSpec, Grants, Pipes};

/// Bytes of stderr kept (the end of it): enough for a traceback.
const STDERR_TAIL: usize = 8 * 1024;

impl Sandbox {
    /// See [`crate::CodeRunner::serve`].
    pub(super) async fn serve_stdio(
        &self,
        spec: CodeSpec,
        started: oneshot::Sender<Result<Pipes, String>>,
        cancel: CancellationToken,
    ) {
        if let Backend::Unavailable(why) = &self.backend {
            let _ = started.send(Err(format!("code execution is unavailable: {why}")));
            return;
        }
        if spec.argv.is_empty() {
            let _ = started.send(Err("nothing to run".into()));
            return;
        }
        let slot = tokio::select! {
            slot = self.slots.acquire(&spec.user) => slot,
            () = cancel.cancelled() => return,
        };
        if let Some(uid) = slot.uid {
            let workspace = spec.workspace.clone();
            let handed = tokio::task::spawn_blocking(move || hand_over(&workspace, uid))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            if let Err(e) = handed {
                let _ = started.send(Err(format!("cannot prepare the workspace: {e}")));
                return;
            }
        }
        let tmp = match &self.backend {
            Backend::Landlock(h) => match h.private_tmp(slot.uid) {
                Ok(tmp) => Some(tmp),
                Err(e) => {
                    let _ = started.send(Err(format!("cannot prepare the run's tmp: {e}")));
                    return;
                }
            },
            _ => None,
        };
        let own_session = matches!(self.backend, Backend::Landlock(_));
        // The disk quotas hold for the server's whole life, as for a code run.
        let watch = Watch::new(
            spec.workspace.clone(),
            self.workspace_quota,
            spec.disk.clone(),
        );
        let room = watch.room().await;
        match self.command(&spec, &Grants::default(), slot.uid, tmp.as_deref(), room) {
            Ok(mut cmd) => {
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                if !own_session {
                    cmd.process_group(0);
                }
                match cmd.spawn() {
                    Ok(mut child) => {
                        let group = child.id().map(|id| Pid::from_raw(id as i32));
                        let tail = Arc::new(Mutex::new(String::new()));
                        let pipes = match (child.stdin.take(), child.stdout.take()) {
                            (Some(stdin), Some(stdout)) => Ok(Pipes {
                                stdin,
                                stdout,
                                stderr: tail.clone(),
                            }),
                            _ => Err("the server's pipes are missing".to_owned()),
                        };
                        let mut stderr = child.stderr.take();
                        // Nobody listens any more: end it at once.
                        let gone = started.send(pipes).is_err();
                        let keep = async {
                            let mut buf = vec![0u8; 4096];
                            while let Some(pipe) = stderr.as_mut() {
                                match pipe.read(&mut buf).await {
                                    Ok(0) | Err(_) => stderr = None,
                                    Ok(n) => {
                                        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                                        t.push_str(&String::from_utf8_lossy(&buf[..n]));
                                        if t.len() > STDERR_TAIL {
                                            let mut cut = t.len() - STDERR_TAIL;
                                            while !t.is_char_boundary(cut) {
                                                cut += 1;
                                            }
                                            t.drain(..cut);
                                        }
                                    }
                                }
                            }
                            std::future::pending::<()>().await
                        };
                        if !gone {
                            tokio::select! {
                                _ = child.wait() => {}
                                () = keep => {}
                                () = tokio::time::sleep(spec.wall_clock) => {
                                    tracing::info!("a sandboxed server reached the end of its lifetime");
                                }
                                () = cancel.cancelled() => {}
                                past = watch.passed() => {
                                    tracing::info!(?past, "a sandboxed server passed a disk quota");
                                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                                    t.push_str(&format!("\n[docchat] {}\n", past.message()));
                                }
                            }
                        }
                        supervise::kill_group(group);
                        let _ = child.kill().await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the sandbox did not start");
                        let _ = started.send(Err(format!("the sandbox did not start: {e}")));
                    }
                }
            }
            Err(e) => {
                let _ = started.send(Err(e));
            }
        }
        if let Some(uid) = slot.uid {
            supervise::sweep(uid).await;
        }
        if let Some(tmp) = tmp {
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(tmp)).await;
        }
        drop(slot);
    }
}
