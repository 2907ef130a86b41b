//! Runs one sandboxed process to its end: its own process group, stdin written and closed,
//! stdout and stderr read at once and kept up to a cap (the rest is counted and dropped, so
//! a flood costs the service no memory), the whole group killed at the wall clock or on
//! cancellation or when its workspace passes its disk quota, and, when the run had a uid of
//! its own, every process left with that uid killed before the slot is given back.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::quota::{POLL, Watch};
use crate::CodeOutput;

/// Bytes of stdout and of stderr kept per run.
pub const CAPTURE_BYTES: usize = 256 * 1024;
/// How long output is still read after the process ended (a pipe a leftover holds open).
const DRAIN: Duration = Duration::from_millis(500);

/// One stream's kept bytes and how many were dropped.
struct Capture {
    kept: Vec<u8>,
    dropped: u64,
    cap: usize,
}

impl Capture {
    fn new(cap: usize) -> Capture {
        Capture {
            kept: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len());
        let take = room.min(bytes.len());
        self.kept.extend_from_slice(&bytes[..take]);
        self.dropped += (bytes.len() - take) as u64;
    }

    fn text(self) -> String {
        let mut text = String::from_utf8_lossy(&self.kept).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n… [output truncated: {} more bytes dropped]",
                self.dropped
            ));
        }
        text
    }
}

/// How the run's process group comes to be: its id is the child's pid either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Made here, at spawn.
    New,
    /// The program calls `setsid` itself (the Landlock helper: a group leader could not).
    OwnSession,
}

/// Spawns `cmd` (stdio, process group and kill-on-drop are set here) and supervises it;
/// with `watch`, its workspace is measured every [`POLL`] and the run killed past a quota.
pub async fn run(
    mut cmd: Command,
    group: Group,
    stdin: Option<Vec<u8>>,
    wall_clock: Duration,
    watch: Option<&Watch>,
    cancel: &CancellationToken,
) -> io::Result<CodeOutput> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    if group == Group::New {
        cmd.process_group(0);
    }
    let mut child = cmd.spawn()?;
    let group = child.id().map(|id| Pid::from_raw(id as i32));
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let mut in_pipe = child.stdin.take();
    let mut feed = Box::pin(async move {
        if let (Some(pipe), Some(data)) = (in_pipe.as_mut(), stdin) {
            // The program may exit without reading: a broken pipe is its business.
            let _ = pipe.write_all(&data).await;
            let _ = pipe.shutdown().await;
        }
        drop(in_pipe);
    });
    let mut fed = false;

    let (mut out, mut err) = (Capture::new(CAPTURE_BYTES), Capture::new(CAPTURE_BYTES));
    let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let deadline = Instant::now() + wall_clock;
    let mut status = None;
    let mut drain_until = None;
    let mut killed = false;
    let (mut timed_out, mut cancelled) = (false, false);
    let mut over_quota = None;
    let mut next_check = Instant::now() + POLL;
    loop {
        if status.is_some() && out_pipe.is_none() && err_pipe.is_none() {
            break;
        }
        tokio::select! {
            read = read_some(&mut out_pipe, &mut out_buf) => match read {
                Some(n) => out.push(&out_buf[..n]),
                None => out_pipe = None,
            },
            read = read_some(&mut err_pipe, &mut err_buf) => match read {
                Some(n) => err.push(&err_buf[..n]),
                None => err_pipe = None,
            },
            () = &mut feed, if !fed => fed = true,
            exit = child.wait(), if status.is_none() => {
                status = Some(exit?);
                drain_until = Some(Instant::now() + DRAIN);
            }
            () = sleep_until(deadline), if status.is_none() && !killed => {
                timed_out = true;
                killed = true;
                kill_group(group);
            }
            () = cancel.cancelled(), if status.is_none() && !killed => {
                cancelled = true;
                killed = true;
                kill_group(group);
            }
            () = sleep_until(next_check), if watch.is_some() && status.is_none() && !killed => {
                if let Some(w) = watch && let Some(past) = w.exceeded(false).await {
                    over_quota = Some(past);
                    killed = true;
                    kill_group(group);
                }
                next_check = Instant::now() + POLL;
            }
            () = sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() => break,
        }
    }
    let status = status.unwrap_or_default();
    Ok(CodeOutput {
        exit_code: status.code(),
        stdout: out.text(),
        stderr: err.text(),
        timed_out,
        cancelled,
        over_quota,
        started_after: None,
    })
}

/// Reads what is there; `None` at the end of the stream (or when there is no stream: then
/// it never completes).
async fn read_some<R: AsyncReadExt + Unpin>(pipe: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    match pipe {
        Some(p) => match p.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

/// SIGKILL to the run's process group, and to the child itself (which may not have made
/// its group yet). Called only before the child is reaped, so the ids are still the child's.
pub(super) fn kill_group(group: Option<Pid>) {
    if let Some(group) = group {
        if let Err(e) = killpg(group, Signal::SIGKILL) {
            tracing::debug!(error = %e, "killing the sandbox's process group");
        }
        let _ = kill(group, Signal::SIGKILL);
    }
}

/// Kills every process whose real uid is `uid` and waits until none is left (a slot's uid
/// belongs to one run, so whatever still runs under it is that run's leftover).
pub async fn sweep(uid: u32) {
    for _ in 0..100 {
        let found = tokio::task::spawn_blocking(move || processes_of(uid))
            .await
            .unwrap_or_default();
        if found.is_empty() {
            return;
        }
        for pid in found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!(uid, "processes of a sandbox slot survived SIGKILL for 2 s");
}

/// Living pids whose real uid is `uid` (from /proc/<pid>/status). Zombies are left out:
/// they are dead already, and whoever they were reparented to (the container's init) reaps
/// them.
fn processes_of(uid: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                let field = |name: &str| {
                    s.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .and_then(|rest| rest.split_whitespace().next())
                };
                field("Uid:").and_then(|u| u.parse::<u32>().ok()) == Some(uid)
                    && !matches!(field("State:"), Some("Z" | "X"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_keeps_its_cap_and_counts_the_rest() {
        let mut c = Capture::new(4);
        c.push(b"abc");
        c.push(b"defg");
        assert_eq!(c.kept, b"abcd");
        assert_eq!(c.dropped, 3);
        assert!(c.text().contains("3 more bytes dropped"));
    }
}
