//! The helper's Landlock ruleset. Every access right of the newest ABI the `landlock` crate
//! knows is handled (best effort: what the running kernel lacks is dropped), so whatever is
//! not granted below is denied:
//!
//! - read and execute: `/usr` and the root's links or directories into it (`/bin`, `/lib*`,
//!   `/sbin`): the system and the Python runtime;
//! - read only: the `/etc` entries a program needs (those bubblewrap binds, with the
//!   `python3*` directories, `hosts` and `nsswitch.conf`; not `passwd`, `shadow` or the
//!   rest), and `/proc` (a program reads its own status there; another process's
//!   `environ`, `mem` or `fd` stay closed: Landlock denies ptrace-class access across
//!   domains);
//! - read and write: `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`;
//! - read only, at its own path: the session collection's documents, when the run has them;
//! - everything: the workspace and the run's private temporary directory;
//! - network: TCP bind and connect handled and never granted (UDP too on kernels that know
//!   it); the seccomp filter refuses non-Unix sockets before that;
//! - scopes: signals and abstract Unix sockets, so the program can neither signal nor
//!   connect to a process outside its sandbox, the service included, even under the same
//!   uid.
//!
//! The ruleset must be enforced at least in part: on a kernel without Landlock the helper
//! refuses to run.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The newest ABI this build knows; older kernels get the subset they support.
const ABI_NEWEST: ABI = ABI::V10;

/// Top-level system directories, read and execute.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Device files a program may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What one run may reach.
#[derive(Debug, Clone)]
pub struct Rules {
    workspace: PathBuf,
    tmp: PathBuf,
    documents: Option<PathBuf>,
    /// `/etc` entries, read only.
    etc: Vec<PathBuf>,
}

impl Rules {
    pub fn new(workspace: &Path, tmp: &Path, documents: Option<&Path>) -> Rules {
        let mut etc: Vec<PathBuf> = super::super::bwrap::ETC
            .iter()
            .chain(&["hosts", "nsswitch.conf"])
            .map(|n| Path::new("/etc").join(n))
            .collect();
        if let Ok(dir) = std::fs::read_dir("/etc") {
            etc.extend(
                dir.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                    .map(|e| e.path()),
            );
        }
        Rules {
            workspace: workspace.to_path_buf(),
            tmp: tmp.to_path_buf(),
            documents: documents.map(Path::to_path_buf),
            etc,
        }
    }

    /// Restricts this thread (the helper has no other) and what it executes.
    pub fn restrict_self(&self) -> Result<(), String> {
        let abi = ABI_NEWEST;
        let all = AccessFs::from_all(abi);
        // The two writable places must exist: no silent skip as for the system paths.
        let workspace = PathFd::new(&self.workspace)
            .map_err(|e| format!("Landlock: {}: {e}", self.workspace.display()))?;
        let tmp =
            PathFd::new(&self.tmp).map_err(|e| format!("Landlock: {}: {e}", self.tmp.display()))?;
        let documents = match &self.documents {
            Some(d) => Some(PathFd::new(d).map_err(|e| format!("Landlock: {}: {e}", d.display()))?),
            None => None,
        };
        let build = || -> Result<RestrictionStatus, RulesetError> {
            Ruleset::default()
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(all)?
                .handle_access(AccessNet::from_all(abi))?
                .scope(Scope::from_all(abi))?
                .create()?
                .add_rules(path_beneath_rules(SYSTEM, AccessFs::from_read(abi)))?
                .add_rules(path_beneath_rules(
                    &self.etc,
                    AccessFs::ReadFile | AccessFs::ReadDir,
                ))?
                .add_rules(path_beneath_rules(
                    ["/proc"],
                    AccessFs::ReadFile | AccessFs::ReadDir,
                ))?
                .add_rules(path_beneath_rules(
                    DEVICES,
                    AccessFs::from_file(abi) & !AccessFs::Execute,
                ))?
                .add_rules(documents.map(|d| {
                    Ok::<_, RulesetError>(PathBeneath::new(
                        d,
                        AccessFs::ReadFile | AccessFs::ReadDir,
                    ))
                }))?
                .add_rule(PathBeneath::new(workspace, all))?
                .add_rule(PathBeneath::new(tmp, all))?
                .restrict_self()
        };
        let status = build().map_err(|e| format!("Landlock: {e}"))?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(format!(
                "Landlock is not enforced on this kernel ({:?}): refusing to run without it",
                status.landlock
            ));
        }
        Ok(())
    }
}
