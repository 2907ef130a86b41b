//! Backend 2, the Landlock + seccomp helper, on the service's side: where bubblewrap cannot
//! create namespaces (a Kubernetes pod under the runtime's default seccomp profile denies
//! `unshare` and `mount`), each run is started through `docchat-sandbox-exec`, a small
//! program of this package ([`super::exec`]) that confines itself and then `execve`s the
//! run's program. This module finds that program, prepares a run's private temporary
//! directory and writes the helper's command line ([`Invocation`]), which the helper parses
//! back with the same type, so the two sides cannot drift apart.
//!
//! Without namespaces the program sees the host's paths: its working directory and `HOME`
//! are the workspace's real path, `TMPDIR` a private directory under the sandbox's
//! directory, and nothing else is writable. Every ancestor of both must be searchable
//! (`o+x`) by the slot uids; the probe says so when they are not.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::limits::Limits;

/// The helper's file name, next to the service's binary.
pub const PROGRAM: &str = "docchat-sandbox-exec";

/// One run as the helper sees it: who, where, which limits, and the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The slot uid (and gid) to become; `None` keeps the caller's (the service is not
    /// root). The helper refuses to run a program as root.
    pub uid: Option<u32>,
    /// The run's workspace (absolute): read-write, the working directory and `HOME`.
    pub workspace: PathBuf,
    /// The run's private temporary directory (absolute): read-write, `TMPDIR`.
    pub tmp: PathBuf,
    /// The session collection's documents (absolute), read-only at their own path.
    pub documents: Option<PathBuf>,
    pub limits: Limits,
    /// The program and its arguments; a name without `/` is looked up in the sandbox's PATH.
    pub argv: Vec<OsString>,
}

impl Invocation {
    /// The helper's arguments (without the helper itself).
    pub fn to_args(&self) -> Vec<OsString> {
        let l = &self.limits;
        let mut a: Vec<OsString> = Vec::with_capacity(20 + self.argv.len());
        if let Some(uid) = self.uid {
            a.extend(["--uid".into(), uid.to_string().into()]);
        }
        a.extend([
            "--workspace".into(),
            self.workspace.clone().into_os_string(),
            "--tmp".into(),
            self.tmp.clone().into_os_string(),
        ]);
        if let Some(docs) = &self.documents {
            a.extend(["--documents".into(), docs.clone().into_os_string()]);
        }
        for (flag, value) in [
            ("--as", l.address_space),
            ("--cpu", l.cpu_seconds),
            ("--nproc", l.processes),
            ("--fsize", l.file_size),
            ("--nofile", l.open_files),
        ] {
            a.extend([flag.into(), value.to_string().into()]);
        }
        a.push("--".into());
        a.extend(self.argv.iter().cloned());
        a
    }

    /// Parses what [`Invocation::to_args`] wrote; every option but `--uid` is required.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, String> {
        let mut args = args.into_iter();
        let (mut uid, mut workspace, mut tmp, mut documents) = (None, None, None, None);
        let mut limits: [Option<u64>; 5] = [None; 5];
        let number = |flag: &str, v: Option<OsString>| -> Result<u64, String> {
            v.and_then(|v| v.into_string().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("{flag} needs a number"))
        };
        loop {
            let Some(flag) = args.next() else {
                return Err("no program given (expected `-- PROGRAM [ARGS...]`)".into());
            };
            let flag = flag.to_string_lossy().into_owned();
            match flag.as_str() {
                "--" => break,
                "--uid" => {
                    let n = number(&flag, args.next())?;
                    uid = Some(u32::try_from(n).map_err(|_| "--uid is out of range")?);
                }
                "--workspace" => workspace = args.next().map(PathBuf::from),
                "--tmp" => tmp = args.next().map(PathBuf::from),
                "--documents" => documents = Some(args.next().map(PathBuf::from)),
                "--as" => limits[0] = Some(number(&flag, args.next())?),
                "--cpu" => limits[1] = Some(number(&flag, args.next())?),
                "--nproc" => limits[2] = Some(number(&flag, args.next())?),
                "--fsize" => limits[3] = Some(number(&flag, args.next())?),
                "--nofile" => limits[4] = Some(number(&flag, args.next())?),
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        let argv: Vec<OsString> = args.collect();
        if argv.is_empty() {
            return Err("no program given after `--`".into());
        }
        let absolute = |name: &str, p: Option<PathBuf>| {
            p.filter(|p| p.is_absolute())
                .ok_or_else(|| format!("--{name} needs an absolute path"))
        };
        let [Some(a), Some(c), Some(n), Some(f), Some(o)] = limits else {
            return Err("every limit is required: --as --cpu --nproc --fsize --nofile".into());
        };
        Ok(Invocation {
            uid,
            workspace: absolute("workspace", workspace)?,
            tmp: absolute("tmp", tmp)?,
            documents: documents.map(|d| absolute("documents", d)).transpose()?,
            limits: Limits {
                address_space: a,
                cpu_seconds: c,
                processes: n,
                file_size: f,
                open_files: o,
            },
            argv,
        })
    }
}

/// The helper backend: where its program is and where runs get their temporary directory.
#[derive(Debug, Clone)]
pub struct Helper {
    program: PathBuf,
    /// Parent of the runs' private temporary directories (searchable, not listable).
    tmp_root: PathBuf,
}

impl Helper {
    /// The backend when its program is found: `explicit`, else next to the running binary
    /// (or one level up, for test binaries under `target/*/deps`).
    pub fn find(explicit: Option<&Path>, tmp_root: PathBuf) -> Result<Helper, String> {
        let program = match explicit {
            Some(p) if p.is_file() => p.to_path_buf(),
            Some(p) => {
                return Err(format!(
                    "{} (DOCCHAT_SANDBOX_HELPER) does not exist",
                    p.display()
                ));
            }
            None => {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot locate the running binary: {e}"))?;
                let dir = exe.parent().unwrap_or(Path::new("/"));
                [Some(dir), dir.parent()]
                    .into_iter()
                    .flatten()
                    .map(|d| d.join(PROGRAM))
                    .find(|p| p.is_file())
                    .ok_or_else(|| {
                        format!("{PROGRAM} is not installed next to {}", exe.display())
                    })?
            }
        };
        std::fs::create_dir_all(&tmp_root)
            .and_then(|()| {
                std::fs::set_permissions(&tmp_root, std::fs::Permissions::from_mode(0o711))
            })
            .map_err(|e| format!("cannot prepare {}: {e}", tmp_root.display()))?;
        Ok(Helper { program, tmp_root })
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// A new private temporary directory for one run, owned by `uid` (mode 0700).
    pub fn private_tmp(&self, uid: Option<u32>) -> std::io::Result<PathBuf> {
        let dir = self
            .tmp_root
            .join(uuid::Uuid::now_v7().simple().to_string());
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        if let Some(uid) = uid {
            std::os::unix::fs::lchown(&dir, Some(uid), Some(uid))?;
        }
        Ok(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_round_trips_and_bad_ones_are_refused() {
        let inv = Invocation {
            uid: Some(64200),
            workspace: "/data/ws".into(),
            tmp: "/data/tmp/x".into(),
            documents: Some("/data/shelf/c1".into()),
            limits: Limits {
                address_space: 1 << 30,
                cpu_seconds: 3,
                processes: 64,
                file_size: 1 << 20,
                open_files: 256,
            },
            argv: vec!["python3".into(), "-c".into(), "--uid".into()],
        };
        assert_eq!(Invocation::parse(inv.to_args()).unwrap(), inv);
        let no_uid = Invocation {
            uid: None,
            documents: None,
            ..inv.clone()
        };
        assert_eq!(Invocation::parse(no_uid.to_args()).unwrap(), no_uid);

        let mut args = inv.to_args();
        let at = args.iter().position(|a| a == "--cpu").unwrap();
        args.drain(at..at + 2);
        assert!(Invocation::parse(args).unwrap_err().contains("every limit"));
        let relative = Invocation {
            workspace: "ws".into(),
            ..inv.clone()
        };
        assert!(
            Invocation::parse(relative.to_args())
                .unwrap_err()
                .contains("absolute")
        );
        let nothing = Invocation {
            argv: vec![],
            ..inv
        };
        assert!(
            Invocation::parse(nothing.to_args())
                .unwrap_err()
                .contains("no program")
        );
    }
}
