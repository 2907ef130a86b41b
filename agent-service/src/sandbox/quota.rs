//! The workspace disk quota (issue 37): a session's workspace holds at most
//! `DOCCHAT_WORKSPACE_QUOTA_MB` (default 1024) of disk. A code run may not write a single
//! file larger than what is left when it starts (RLIMIT_FSIZE), and its workspace is
//! measured while it runs ([`POLL`]): past the quota the run is killed and says why. The
//! stored files respect the same limit (stored/mod.rs).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a running program's workspace is measured.
pub const POLL: Duration = Duration::from_millis(500);

const MIB: u64 = 1 << 20;

/// The quota of one workspace, in bytes (`DOCCHAT_WORKSPACE_QUOTA_MB`, Config's
/// `workspace_quota_mb`).
pub fn workspace_quota(config: &docchat_common::Config) -> u64 {
    config.workspace_quota_mb.max(1).saturating_mul(MIB)
}

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

/// What a run is watched for.
#[derive(Debug, Clone)]
pub struct Watch {
    pub workspace: PathBuf,
    pub quota: u64,
}

impl Watch {
    /// The workspace's disk usage now.
    pub async fn usage(&self) -> u64 {
        let root = self.workspace.clone();
        tokio::task::spawn_blocking(move || disk_usage(&root))
            .await
            .unwrap_or(0)
    }

    /// Whether the workspace is past its quota now.
    pub async fn exceeded(&self) -> bool {
        self.usage().await > self.quota
    }
}

/// The tool's error when a run passed the quota.
pub fn exceeded_message(quota: u64) -> String {
    format!(
        "the run was stopped: the workspace passed its disk quota of {} MiB (DOCCHAT_WORKSPACE_QUOTA_MB); delete files to make room",
        quota / MIB
    )
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
