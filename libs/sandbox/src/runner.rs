//! The contract between the sandbox and the code tools: a program to run ([`CodeSpec`]),
//! what it left ([`CodeOutput`]), what a run may use beyond the usual limits ([`Grants`]),
//! and [`CodeRunner`], the face of a sandbox (this crate's [`crate::Sandbox`], or a test's
//! runner) the agent's tools hold.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// One program for the sandbox.
#[derive(Debug, Clone)]
pub struct CodeSpec {
    pub argv: Vec<String>,
    /// Writable, the working directory.
    pub workspace: PathBuf,
    pub stdin: Option<Vec<u8>>,
    pub wall_clock: Duration,
    pub memory_bytes: Option<u64>,
    /// The session collection's documents (a host directory), readable but not writable
    /// in the sandbox at [`CodeRunner::documents_at`].
    pub documents: Option<PathBuf>,
    /// Whose run it is (the caller's user id): its share of the sandbox's slots. Empty for
    /// the service's own runs.
    pub user: String,
    /// The user's other workspaces and their total, watched with this one.
    pub disk: UserDisk,
}

/// The disk a run's user holds in their other sessions' workspaces, counted with the run's
/// workspace against their total (`DOCCHAT_USER_DISK_QUOTA_MB`, sandbox/quota.rs). The
/// default counts nothing (the service's own runs, tests).
#[derive(Debug, Clone, Default)]
pub struct UserDisk {
    /// Bytes the user's workspaces may hold together; `None`: no total.
    pub quota: Option<u64>,
    /// The user's other sessions' workspaces.
    pub others: std::sync::Arc<[PathBuf]>,
}

/// Which disk quota stopped a run, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverQuota {
    /// The workspace's own (`DOCCHAT_WORKSPACE_QUOTA_MB`).
    Workspace(u64),
    /// The user's workspaces together (`DOCCHAT_USER_DISK_QUOTA_MB`).
    User(u64),
}

/// Where the collection's documents appear inside a namespaced sandbox.
pub const DOCUMENTS_MOUNT: &str = "/documents";

#[derive(Debug, Clone, Default)]
pub struct CodeOutput {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub cancelled: bool,
    /// The run was stopped because its workspace passed this quota.
    pub over_quota: Option<OverQuota>,
    /// From the request to the program's start: the wait for a slot and the workspace's
    /// preparation (runners without slots leave it unset).
    pub started_after: Option<std::time::Duration>,
}

/// What a run may use beyond the sandbox's usual limits (a headless browser starts well
/// over a hundred threads, which count against the process limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// RLIMIT_NPROC instead of the sandbox's default.
    pub processes: Option<u64>,
}

/// The sandbox, as the code tools see it.
#[async_trait::async_trait]
pub trait CodeRunner: Send + Sync {
    async fn run(&self, spec: CodeSpec, cancel: &CancellationToken) -> Result<CodeOutput, String>;

    /// As [`CodeRunner::run`], with `grants` (runners without limits of their own ignore
    /// them).
    async fn run_with(
        &self,
        spec: CodeSpec,
        _grants: &Grants,
        cancel: &CancellationToken,
    ) -> Result<CodeOutput, String> {
        self.run(spec, cancel).await
    }

    /// Whether a run has a network namespace of its own (its loopback is its own and
    /// nothing else is reachable): where a browser may run behind the egress proxy.
    fn private_network(&self) -> bool {
        false
    }

    /// Whether runs can succeed at all (the code tools are offered only then).
    fn available(&self) -> bool {
        true
    }

    /// The backend's name and its slots in use and waiting (readiness); `None` where runs
    /// are not slotted (test runners).
    fn load(&self) -> Option<(&'static str, crate::fair::Load)> {
        None
    }

    /// The path at which a program sees the documents directory `host`.
    fn documents_at(&self, _host: &std::path::Path) -> PathBuf {
        PathBuf::from(DOCUMENTS_MOUNT)
    }

    /// Runs a long-lived program (a local MCP server) with its stdin and stdout piped to
    /// the caller, confined like [`CodeRunner::run`] (`spec.documents`: a read-only
    /// directory it sees at [`CodeRunner::documents_at`]; `spec.wall_clock`: its lifetime).
    /// The pipes (or why it did not start) go to `started`; this returns when the program
    /// has ended and everything it left is killed: at its own exit, its lifetime, or
    /// `cancel` (the caller's drop).
    async fn serve(
        &self,
        spec: CodeSpec,
        started: tokio::sync::oneshot::Sender<Result<Pipes, String>>,
        cancel: CancellationToken,
    ) {
        let _ = (spec, cancel);
        let _ = started.send(Err("this sandbox cannot run servers".into()));
    }
}

/// A served program's pipes ([`CodeRunner::serve`]).
pub struct Pipes {
    pub stdin: tokio::process::ChildStdin,
    pub stdout: tokio::process::ChildStdout,
    /// The last bytes it wrote to stderr (why it failed to start, for the caller).
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// No sandbox: every run is refused.
pub struct NoSandbox(pub String);

#[async_trait::async_trait]
impl CodeRunner for NoSandbox {
    async fn run(&self, _: CodeSpec, _: &CancellationToken) -> Result<CodeOutput, String> {
        Err(format!("code execution is unavailable: {}", self.0))
    }

    fn available(&self) -> bool {
        false
    }
}
