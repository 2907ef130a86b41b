//! The disk quotas (issue 37): a session's workspace holds at most
//! `DOCCHAT_WORKSPACE_QUOTA_MB` (default 1024) of disk, and all of one user's workspaces
//! together at most `DOCCHAT_USER_DISK_QUOTA_MB` (default 4096). A code run may not write a
//! single file larger than what is left of either when it starts (RLIMIT_FSIZE), and its
//! workspace is measured while it runs ([`POLL`]; the user's other workspaces every
//! [`OTHERS_POLL`]): past either quota the run is killed and says which. A sandboxed server
//! (a local MCP server) is watched the same way for its whole life. The stored files respect
//! the workspace's quota (stored/mod.rs).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{OverQuota, UserDisk};

/// How often a running program's workspace is measured.
pub const POLL: Duration = Duration::from_millis(500);

/// How often the user's other workspaces are measured while a program runs (they change
/// only when the user's other runs write, and there may be many of them).
pub const OTHERS_POLL: Duration = Duration::from_secs(2);

const MIB: u64 = 1 << 20;

/// The disk `root` takes: allocated blocks of everything under it (a sparse file counts
/// what it holds, not its length), without following links or leaving its filesystem.
pub fn disk_usage(root: &Path) -> u64 {
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let device = top.dev();
    let mut total = top.blocks().saturating_mul(512);
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() && meta.dev() == device {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// What a run is watched for: its workspace against the workspace quota and, with the
/// user's other workspaces, against the user's total.
#[derive(Debug)]
pub struct Watch {
    workspace: PathBuf,
    quota: u64,
    user: UserDisk,
    /// The other workspaces' usage and when it was measured.
    others: Mutex<Option<(u64, Instant)>>,
}

impl Watch {
    pub fn new(workspace: PathBuf, quota: u64, user: UserDisk) -> Watch {
        Watch {
            workspace,
            quota,
            user,
            others: Mutex::new(None),
        }
    }

    /// The workspace's disk usage now.
    pub async fn usage(&self) -> u64 {
        let root = self.workspace.clone();
        tokio::task::spawn_blocking(move || disk_usage(&root))
            .await
            .unwrap_or(0)
    }

    /// The user's other workspaces' usage, measured at most every [`OTHERS_POLL`].
    async fn others(&self) -> u64 {
        let cached = *self.others.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((bytes, at)) = cached
            && at.elapsed() < OTHERS_POLL
        {
            return bytes;
        }
        let roots = self.user.others.clone();
        let bytes = tokio::task::spawn_blocking(move || roots.iter().map(|r| disk_usage(r)).sum())
            .await
            .unwrap_or(0);
        *self.others.lock().unwrap_or_else(|p| p.into_inner()) = Some((bytes, Instant::now()));
        bytes
    }

    /// Bytes the run may still write: what is left of the workspace's quota and of the
    /// user's total, whichever is less.
    pub async fn room(&self) -> u64 {
        let used = self.usage().await;
        let mut room = self.quota.saturating_sub(used);
        if let Some(total) = self.user.quota {
            let together = used.saturating_add(self.others().await);
            room = room.min(total.saturating_sub(together));
        }
        room
    }

    /// Which quota the workspace is past now (`at_least`: also when it has just reached
    /// it, as a file cut at what was left does).
    pub async fn exceeded(&self, at_least: bool) -> Option<OverQuota> {
        let past = |used: u64, quota: u64| {
            if at_least {
                used >= quota
            } else {
                used > quota
            }
        };
        let used = self.usage().await;
        if past(used, self.quota) {
            return Some(OverQuota::Workspace(self.quota));
        }
        let total = self.user.quota?;
        past(used.saturating_add(self.others().await), total).then_some(OverQuota::User(total))
    }

    /// Completes when the workspace passes a quota, measured every [`POLL`] (a program
    /// that lives long, as a local MCP server does).
    pub async fn passed(&self) -> OverQuota {
        loop {
            tokio::time::sleep(POLL).await;
            if let Some(past) = self.exceeded(false).await {
                return past;
            }
        }
    }
}

impl Watch {
    /// Whether `bytes` more fit, when a file of `replacing` bytes (allocated) goes.
    pub async fn fits(&self, bytes: u64, replacing: u64) -> Result<(), OverQuota> {
        let used = self
            .usage()
            .await
            .saturating_sub(replacing)
            .saturating_add(bytes);
        if used > self.quota {
            return Err(OverQuota::Workspace(self.quota));
        }
        match self.user.quota {
            Some(total) if used.saturating_add(self.others().await) > total => {
                Err(OverQuota::User(total))
            }
            _ => Ok(()),
        }
    }
}

impl OverQuota {
    /// Which quota, in words.
    pub fn what(&self) -> String {
        match self {
            OverQuota::Workspace(quota) => format!(
                "the workspace's disk quota of {} MiB (DOCCHAT_WORKSPACE_QUOTA_MB)",
                quota / MIB
            ),
            OverQuota::User(quota) => format!(
                "your disk quota of {} MiB for all your sessions' workspaces together (DOCCHAT_USER_DISK_QUOTA_MB)",
                quota / MIB
            ),
        }
    }

    /// The tool's error when a run passed it.
    pub fn message(&self) -> String {
        format!(
            "the run was stopped: it passed {}; delete files to make room",
            self.what()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_what_is_written_and_not_what_is_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let empty = disk_usage(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/data"), vec![7u8; 3 * MIB as usize]).unwrap();
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        let used = disk_usage(dir.path()) - empty;
        assert!(
            (3 * MIB..4 * MIB).contains(&used),
            "3 MiB written, a 1 TiB hole: {used}"
        );
    }
}
