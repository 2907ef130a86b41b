//! `docchat-sandbox-exec`, the Landlock + seccomp helper itself: the service runs it per
//! code run ([`super::helper`] writes its command line) where bubblewrap cannot work. It
//! confines itself, in this order, and then `execve`s the run's program:
//!
//! 1. a session of its own (`setsid`: its own process group, no controlling terminal);
//! 2. as root: the capability bounding set (when it may), inheritable and ambient sets
//!    emptied; `setgroups([])`, `setresgid`, `setresuid` to the slot uid; then it checks
//!    that every id is the slot's and that `setuid(0)` / `setgid(0)` fail. It never runs a
//!    program as root;
//! 3. `PR_SET_PDEATHSIG` = SIGKILL (after the uid change, which clears it), and it stops
//!    if the service is already gone;
//! 4. the working directory: the workspace (checked as the slot uid);
//! 5. `PR_SET_NO_NEW_PRIVS`, then the Landlock ruleset of [`ruleset`] (it refuses to run
//!    when the kernel enforces none of it);
//! 6. the rlimits of [`super::limits`], soft = hard;
//! 7. the seccomp filters of [`syscalls`], last, so that nothing above is filtered;
//! 8. `execve` with a cleared environment ([`super::environment`]).
//!
//! A failure before `execve` exits with [`SETUP_FAILED`] and one line on stderr.

pub mod ruleset;
pub mod syscalls;

use std::ffi::{CString, OsStr};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nix::sys::prctl;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::unistd::{self, Gid, Uid};

use super::helper::Invocation;
use super::limits::Limits;

/// The exit status when the helper could not confine itself or start the program (126 and
/// 127 are the shell's "cannot execute" and "not found", which a program may use).
pub const SETUP_FAILED: u8 = 125;

/// Where a program name without `/` is looked up (the sandbox's PATH).
const PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// The helper's `main`.
pub fn main() -> ExitCode {
    let result = Invocation::parse(std::env::args_os().skip(1)).and_then(|inv| run(&inv));
    let Err(why) = result;
    let _ = writeln!(std::io::stderr(), "{}: {why}", super::helper::PROGRAM);
    ExitCode::from(SETUP_FAILED)
}

/// Confines this process as `inv` says and replaces it with the program; returns only on
/// failure.
fn run(inv: &Invocation) -> Result<std::convert::Infallible, String> {
    let parent = unistd::getppid();
    // Everything that allocates or reads configuration comes first.
    let program = resolve(&inv.argv[0])?;
    let program = cstring(program.as_os_str())?;
    let argv = inv
        .argv
        .iter()
        .map(|a| cstring(a))
        .collect::<Result<Vec<_>, _>>()?;
    let env = super::environment(&inv.workspace, &inv.tmp)
        .into_iter()
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ruleset = ruleset::Rules::new(&inv.workspace, &inv.tmp, inv.documents.as_deref());
    let filters = syscalls::filters()?;

    unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
    drop_privileges(inv.uid)?;
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    if unistd::getppid() != parent {
        return Err("the service is gone".into());
    }
    unistd::chdir(&inv.workspace).map_err(|e| {
        format!(
            "cannot enter the workspace {} as uid {}: {e} (every parent directory must be searchable by the slot uids: chmod o+x)",
            inv.workspace.display(),
            unistd::getuid()
        )
    })?;
    prctl::set_no_new_privs().map_err(|e| format!("PR_SET_NO_NEW_PRIVS: {e}"))?;
    ruleset.restrict_self()?;
    set_limits(&inv.limits)?;
    for filter in &filters {
        seccompiler::apply_filter(filter).map_err(|e| format!("seccomp: {e}"))?;
    }
    unistd::execve(&program, &argv, &env)
        .map_err(|e| format!("cannot execute {}: {e}", inv.argv[0].to_string_lossy()))
}

fn cstring(s: &OsStr) -> Result<CString, String> {
    CString::new(s.as_bytes()).map_err(|_| format!("{s:?} contains a NUL byte"))
}

/// `name` itself when it has a `/`, else the first executable file of that name on [`PATH`].
fn resolve(name: &OsStr) -> Result<PathBuf, String> {
    if name.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(name));
    }
    PATH.iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| {
            p.metadata().is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
        .ok_or_else(|| format!("{}: command not found", name.to_string_lossy()))
}

/// Becomes `uid` for good (as root), or stays the caller (not root, no uid asked), without
/// inheritable or ambient capabilities either way.
fn drop_privileges(uid: Option<u32>) -> Result<(), String> {
    let root = unistd::geteuid().is_root();
    if uid == Some(0) {
        return Err("refusing to run a program as root: --uid 0".into());
    }
    let Some(uid) = uid else {
        if root {
            return Err("refusing to run a program as root: give --uid".into());
        }
        return clear_inherited_caps();
    };
    if root {
        // Needs CAP_SETPCAP, which a container may not grant: the bounding set only limits
        // what an execve could add, and no_new_privs already prevents that.
        if caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP)
            .unwrap_or(false)
        {
            caps::clear(None, caps::CapSet::Bounding)
                .map_err(|e| format!("clearing the capability bounding set: {e}"))?;
        }
    }
    clear_inherited_caps()?;
    let (u, g) = (Uid::from_raw(uid), Gid::from_raw(uid));
    unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    unistd::setresgid(g, g, g).map_err(|e| format!("setresgid({uid}): {e}"))?;
    unistd::setresuid(u, u, u).map_err(|e| format!("setresuid({uid}): {e}"))?;
    // No way back.
    let ids = unistd::getresuid().map_err(|e| e.to_string())?;
    let gids = unistd::getresgid().map_err(|e| e.to_string())?;
    let groups = unistd::getgroups().map_err(|e| e.to_string())?;
    if [ids.real, ids.effective, ids.saved] != [u; 3]
        || [gids.real, gids.effective, gids.saved] != [g; 3]
        || groups.iter().any(|gr| *gr != g)
        || unistd::setuid(Uid::from_raw(0)).is_ok()
        || unistd::setgid(Gid::from_raw(0)).is_ok()
        || !caps::read(None, caps::CapSet::Permitted).is_ok_and(|c| c.is_empty())
    {
        return Err(format!("the switch to uid {uid} did not stick"));
    }
    Ok(())
}

fn clear_inherited_caps() -> Result<(), String> {
    caps::clear(None, caps::CapSet::Ambient)
        .and_then(|()| caps::clear(None, caps::CapSet::Inheritable))
        .map_err(|e| format!("clearing inheritable capabilities: {e}"))
}

/// The run's rlimits, soft = hard (the program cannot raise them), and no core files.
fn set_limits(l: &Limits) -> Result<(), String> {
    for (resource, value) in [
        (Resource::RLIMIT_AS, l.address_space),
        (Resource::RLIMIT_CPU, l.cpu_seconds),
        (Resource::RLIMIT_NPROC, l.processes),
        (Resource::RLIMIT_FSIZE, l.file_size),
        (Resource::RLIMIT_NOFILE, l.open_files),
        (Resource::RLIMIT_CORE, 0),
    ] {
        setrlimit(resource, value, value).map_err(|e| format!("setrlimit {resource:?}: {e}"))?;
    }
    Ok(())
}
