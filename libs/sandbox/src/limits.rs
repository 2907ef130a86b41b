//! What one sandboxed run may use, and who it runs as.
//!
//! The limits are rlimits set just before the program is executed (soft = hard, so the
//! program cannot raise them): under bubblewrap by util-linux `prlimit(1)` inside the
//! sandbox (the workspace forbids `unsafe`, which a `pre_exec` hook would need, and bubblewrap
//! itself stays unlimited), under the Landlock helper by the helper itself (`setrlimit`, from
//! the values the service passes it). As root each run takes a slot: an unprivileged uid of its own from a small
//! range, so `RLIMIT_NPROC` (counted per uid, ignored for root) bounds that run alone and
//! every process left behind can be found and killed by its uid.

use std::path::Path;
use std::sync::Mutex;

use nix::fcntl::{Flock, FlockArg};

use super::fair::{FairSlots, Load, Share};
use crate::CodeSpec;

const MIB: u64 = 1 << 20;
/// Address space when the run does not say (`agent_max_memory_usage`).
pub const DEFAULT_MEMORY: u64 = 2048 * MIB;
/// Below this even the interpreter does not start; smaller requests are raised to it.
const MIN_MEMORY: u64 = 32 * MIB;
const PROCESSES: u64 = 64;
const FILE_SIZE: u64 = 256 * MIB;
const OPEN_FILES: u64 = 256;
/// The sandbox's private /tmp (a tmpfs, counted in memory).
pub const TMP_BYTES: u64 = 64 * MIB;

/// The rlimits of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS, bytes.
    pub address_space: u64,
    /// RLIMIT_CPU, seconds: the wall clock rounded up, plus one (the wall clock kills first).
    pub cpu_seconds: u64,
    /// RLIMIT_NPROC.
    pub processes: u64,
    /// RLIMIT_FSIZE, bytes.
    pub file_size: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
}

impl Limits {
    pub fn for_spec(spec: &CodeSpec) -> Limits {
        let wall = spec.wall_clock.as_secs() + u64::from(spec.wall_clock.subsec_nanos() > 0);
        Limits {
            address_space: spec.memory_bytes.unwrap_or(DEFAULT_MEMORY).max(MIN_MEMORY),
            cpu_seconds: wall.max(1) + 1,
            processes: PROCESSES,
            file_size: FILE_SIZE,
            open_files: OPEN_FILES,
        }
    }

    /// These limits with what `grants` raises.
    pub fn granting(mut self, grants: &crate::Grants) -> Limits {
        if let Some(n) = grants.processes {
            self.processes = n;
        }
        self
    }

    /// `prlimit` and its options, to put in front of the program.
    pub fn prlimit(&self, prlimit: &Path) -> Vec<String> {
        vec![
            prlimit.display().to_string(),
            format!("--as={}", self.address_space),
            format!("--cpu={}", self.cpu_seconds),
            format!("--nproc={}", self.processes),
            format!("--fsize={}", self.file_size),
            format!("--nofile={}", self.open_files),
            "--core=0".into(),
            "--".into(),
        ]
    }
}

/// The uids runs take, one run per uid at a time; or, when the service is not root, no
/// switch at all (one slot per run still bounds how many runs go at once). Slots are shared
/// fairly between users ([`FairSlots`]). A uid is also
/// locked host-wide (an flock on a file per uid in the system's temporary directory), so two
/// services on one host (replicas, the tests) never run as the same uid — a slot's sweep
/// kills every process of its uid.
pub struct Slots {
    free: Mutex<Vec<u32>>,
    fair: FairSlots,
    switch: bool,
}

/// A slot held by one run; given back when dropped.
pub struct Slot<'a> {
    /// The run's uid (and gid) when the service switches users.
    pub uid: Option<u32>,
    slots: &'a Slots,
    _share: Share,
    _lock: Option<Flock<std::fs::File>>,
}

/// The host-wide lock of `uid`, when no other process holds it.
fn lock_uid(uid: u32) -> Option<Flock<std::fs::File>> {
    let dir = std::env::temp_dir().join("docchat-sandbox-slots");
    std::fs::create_dir_all(&dir).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(uid.to_string()))
        .ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

impl Slots {
    /// `count` slots, at most `share` of them one user's; uids `base..base + count` when
    /// `switch`.
    pub fn new(base: u32, count: u32, share: u32, switch: bool) -> Slots {
        let count = count.max(1);
        Slots {
            free: Mutex::new((0..count).rev().map(|i| base.saturating_add(i)).collect()),
            fair: FairSlots::new(count as usize, share as usize),
            switch,
        }
    }

    /// Slots in use and waiting.
    pub fn load(&self) -> Load {
        self.fair.load()
    }

    /// Whether runs get uids of their own.
    pub fn switches(&self) -> bool {
        self.switch
    }

    /// Waits for a slot `user` may take (its fair share).
    pub async fn acquire(&self, user: &str) -> Slot<'_> {
        let share = self.fair.acquire(user).await;
        if !self.switch {
            return Slot {
                uid: None,
                slots: self,
                _share: share,
                _lock: None,
            };
        }
        loop {
            // A free uid of ours that no other process on this host holds.
            let taken = {
                let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
                let found = free
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(i, uid)| lock_uid(*uid).map(|lock| (i, lock)));
                found.map(|(i, lock)| (free.remove(i), lock))
            };
            if let Some((uid, lock)) = taken {
                return Slot {
                    uid: Some(uid),
                    slots: self,
                    _share: share,
                    _lock: Some(lock),
                };
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(uid) = self.uid {
            self.slots
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spec(wall_ms: u64, memory: Option<u64>) -> CodeSpec {
        CodeSpec {
            argv: vec!["true".into()],
            workspace: "/nowhere".into(),
            stdin: None,
            wall_clock: Duration::from_millis(wall_ms),
            memory_bytes: memory,
            documents: None,
            user: String::new(),
            disk: crate::UserDisk::default(),
        }
    }

    #[test]
    fn limits_follow_the_spec() {
        let l = Limits::for_spec(&spec(2500, Some(256 * MIB)));
        assert_eq!(l.address_space, 256 * MIB);
        assert_eq!(l.cpu_seconds, 4);
        assert_eq!(
            Limits::for_spec(&spec(100, None)).address_space,
            DEFAULT_MEMORY
        );
        assert_eq!(
            Limits::for_spec(&spec(100, Some(1))).address_space,
            MIN_MEMORY
        );
        let argv = l.prlimit(Path::new("/usr/bin/prlimit"));
        assert!(argv.contains(&"--core=0".to_owned()));
        assert_eq!(argv.last().map(String::as_str), Some("--"));
    }

    #[tokio::test]
    async fn a_uid_is_held_by_one_run_at_a_time() {
        let slots = Slots::new(1000, 2, 2, true);
        // Another service on this host holds 1000 (uids are locked host-wide).
        let other = Slots::new(1000, 1, 1, true);
        let theirs = other.acquire("u").await;
        assert_eq!(theirs.uid, Some(1000));
        let a = slots.acquire("u").await;
        assert_eq!(a.uid, Some(1001), "1000 is the other service's");
        assert!(
            tokio::time::timeout(Duration::from_millis(100), slots.acquire("u"))
                .await
                .is_err(),
            "1000 stays locked while the other service holds it"
        );
        drop(theirs);
        let b = slots.acquire("u").await;
        assert_ne!(a.uid, b.uid);
        let held = a.uid;
        drop(a);
        let c = slots.acquire("u").await;
        assert_eq!(c.uid, held);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), slots.acquire("u"))
                .await
                .is_err(),
            "a third run waits"
        );
    }
}
