//! Backend 1, bubblewrap: a new mount, pid, network, IPC and UTS namespace per run, with
//! only `/usr` (read-only, and the root's symlinks into it), a minimum of `/etc`, a fresh
//! `/proc` and `/dev`, a size-capped tmpfs `/tmp` and the session's workspace (read-write at
//! `/workspace`, the working directory), and the session collection's documents read-only at
//! `/documents` when the run has them. The environment is cleared and rebuilt; every
//! capability is dropped; bubblewrap sets `PR_SET_NO_NEW_PRIVS`.
//!
//! As root, bubblewrap needs no user namespace: it builds the sandbox as root (so the data
//! directory may stay private to root) and `setpriv(1)`, inside, drops to the run's slot
//! uid with no groups, an empty bounding set and no capabilities before the program starts.
//! Otherwise bubblewrap runs unprivileged in a user namespace of its own (`--unshare-user`,
//! uid 1000 inside), where user namespaces are allowed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::limits::{Limits, TMP_BYTES};
use crate::CodeSpec;

/// The uid inside an unprivileged sandbox's user namespace.
pub const INNER_UID: u32 = 1000;

/// Files of `/etc` a program may need, read-only; missing ones are skipped (the Landlock
/// helper grants the same).
pub(crate) const ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "fonts",
    "mime.types",
    // Debian's matplotlib reads its defaults from here.
    "matplotlibrc",
];

/// Top-level directories that are symlinks into `/usr` on a merged-/usr system (bound
/// read-only where they are real directories).
const ROOT_LINKS: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// The binaries this backend runs, found at start.
#[derive(Debug, Clone)]
pub struct Bwrap {
    bwrap: PathBuf,
    prlimit: PathBuf,
    setpriv: PathBuf,
    /// Our passwd, group, hosts and nsswitch.conf (see [`write_etc`]).
    etc: PathBuf,
    /// The host's `/etc` entries bound read-only (those of [`ETC`] that exist, python3*).
    host_etc: Vec<PathBuf>,
    /// `--symlink` / `--ro-bind` pairs for [`ROOT_LINKS`].
    root_links: Vec<(bool, OsString, PathBuf)>,
}

/// The first of `names` found in `/usr/bin`, `/bin` or PATH.
#[expect(
    clippy::disallowed_methods,
    reason = "PATH is where programs are looked up"
)]
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["/usr/bin", "/bin"]
        .into_iter()
        .map(PathBuf::from)
        .chain(std::env::split_paths(&path))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Bwrap {
    /// The backend when its programs are installed; why not otherwise.
    pub fn find(etc: PathBuf) -> Result<Bwrap, String> {
        let need = |name: &str, package: &str| {
            which(name).ok_or_else(|| {
                format!("{name} is not installed (Debian package {package}; scripts/sandbox-runtime.sh installs it)")
            })
        };
        let bwrap = need("bwrap", "bubblewrap")?;
        let prlimit = need("prlimit", "util-linux")?;
        let setpriv = need("setpriv", "util-linux")?;
        let mut host_etc: Vec<PathBuf> = ETC
            .iter()
            .map(|n| Path::new("/etc").join(n))
            .filter(|p| p.exists())
            .collect();
        // Debian's Python reads /etc/python3.X (sitecustomize).
        if let Ok(dir) = std::fs::read_dir("/etc") {
            host_etc.extend(
                dir.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                    .map(|e| e.path()),
            );
        }
        let root_links = ROOT_LINKS
            .iter()
            .filter_map(|name| {
                let p = Path::new("/").join(name);
                let meta = p.symlink_metadata().ok()?;
                if meta.file_type().is_symlink() {
                    Some((true, std::fs::read_link(&p).ok()?.into_os_string(), p))
                } else if meta.is_dir() {
                    Some((false, p.clone().into_os_string(), p))
                } else {
                    None
                }
            })
            .collect();
        Ok(Bwrap {
            bwrap,
            prlimit,
            setpriv,
            etc,
            host_etc,
            root_links,
        })
    }

    pub fn program(&self) -> &Path {
        &self.bwrap
    }

    /// bubblewrap's arguments for `spec` (the program is `spec.argv`), as `uid` (root
    /// mode) or unprivileged in a user namespace (`None`).
    pub fn args(&self, spec: &CodeSpec, limits: &Limits, uid: Option<u32>) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::with_capacity(96);
        let mut push = |items: &[&dyn AsRefOs]| {
            for i in items {
                a.push(i.os());
            }
        };
        match uid {
            Some(_) => push(&[
                &"--unshare-ipc",
                &"--unshare-pid",
                &"--unshare-net",
                &"--unshare-uts",
                &"--unshare-cgroup-try",
                &"--cap-drop",
                &"ALL",
                // For setpriv, which drops them with the uid.
                &"--cap-add",
                &"CAP_SETUID",
                &"--cap-add",
                &"CAP_SETGID",
                &"--cap-add",
                &"CAP_SETPCAP",
            ]),
            None => push(&[
                &"--unshare-all",
                &"--unshare-user",
                &"--uid",
                &"1000",
                &"--gid",
                &"1000",
                &"--cap-drop",
                &"ALL",
            ]),
        }
        push(&[
            &"--die-with-parent",
            &"--new-session",
            &"--clearenv",
            &"--hostname",
            &"sandbox",
            &"--ro-bind",
            &"/usr",
            &"/usr",
        ]);
        for (link, source, dest) in &self.root_links {
            push(&[
                if *link { &"--symlink" } else { &"--ro-bind" },
                source,
                dest,
            ]);
        }
        // /etc itself readable and traversable by the slot uid (bwrap makes the parents of a
        // bind 0700 when it runs as root): the libraries behind /etc/alternatives (BLAS for
        // numpy) resolve through it.
        push(&[&"--perms", &"0755", &"--dir", &"/etc"]);
        for p in &self.host_etc {
            push(&[&"--ro-bind", p, p]);
        }
        for name in ["passwd", "group", "hosts", "nsswitch.conf"] {
            let dest = Path::new("/etc").join(name);
            push(&[&"--ro-bind", &self.etc.join(name), &dest]);
        }
        let tmp = TMP_BYTES.to_string();
        push(&[
            &"--proc",
            &"/proc",
            &"--dev",
            &"/dev",
            // Writable by the slot uid too (the sandbox is built as root).
            &"--perms",
            &"1777",
            &"--size",
            &tmp,
            &"--tmpfs",
            &"/tmp",
            &"--bind",
            &spec.workspace,
            &"/workspace",
            &"--chdir",
            &"/workspace",
        ]);
        if let Some(docs) = &spec.documents {
            push(&[&"--ro-bind", docs, &crate::DOCUMENTS_MOUNT]);
        }
        for (k, v) in super::environment(Path::new("/workspace"), Path::new("/tmp")) {
            push(&[&"--setenv", &k, &v]);
        }
        push(&[&"--"]);
        if let Some(uid) = uid {
            let (reuid, regid) = (format!("--reuid={uid}"), format!("--regid={uid}"));
            push(&[
                &self.setpriv,
                &reuid,
                &regid,
                &"--clear-groups",
                &"--inh-caps=-all",
                &"--bounding-set=-all",
                &"--",
            ]);
        }
        a.extend(
            limits
                .prlimit(&self.prlimit)
                .into_iter()
                .map(OsString::from),
        );
        a.extend(spec.argv.iter().map(OsString::from));
        a
    }
}

/// Writes the sandbox's own `/etc` files into `dir`: one user `sandbox` for the inner uid
/// and every slot uid, and nothing of the host's accounts.
pub fn write_etc(dir: &Path, uids: impl Iterator<Item = u32>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut passwd = String::new();
    let mut group = String::new();
    for uid in std::iter::once(INNER_UID).chain(uids) {
        passwd.push_str(&format!(
            "sandbox:x:{uid}:{uid}:sandbox:/workspace:/bin/sh\n"
        ));
        group.push_str(&format!("sandbox:x:{uid}:\n"));
    }
    std::fs::write(dir.join("passwd"), passwd)?;
    std::fs::write(dir.join("group"), group)?;
    std::fs::write(
        dir.join("hosts"),
        "127.0.0.1 localhost sandbox\n::1 localhost\n",
    )?;
    std::fs::write(
        dir.join("nsswitch.conf"),
        "passwd: files\ngroup: files\nhosts: files\n",
    )?;
    Ok(())
}

/// Strings and paths alike, for the argument list.
trait AsRefOs {
    fn os(&self) -> OsString;
}

impl AsRefOs for &str {
    fn os(&self) -> OsString {
        OsString::from(*self)
    }
}

impl AsRefOs for String {
    fn os(&self) -> OsString {
        OsString::from(self)
    }
}

impl AsRefOs for PathBuf {
    fn os(&self) -> OsString {
        self.clone().into_os_string()
    }
}

impl AsRefOs for OsString {
    fn os(&self) -> OsString {
        self.clone()
    }
}
