//! Paths inside a session's workspace, for the tools, the stored files and memory:
//! relative, no `..`, and no symlink on the way that leads out of it.

use std::path::{Component, Path, PathBuf};

/// The host path of `relative` inside `root`. Refused: absolute paths, `..`, and any
/// existing component that is a symlink resolving outside `root`.
pub fn resolve(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let rel = relative.trim();
    let rel = rel.strip_prefix("/workspace/").unwrap_or(rel);
    let rel = if rel.is_empty() || rel == "/workspace" {
        "."
    } else {
        rel
    };
    let p = Path::new(rel);
    let mut out = root.to_path_buf();
    for c in p.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("{relative:?}: `..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "{relative:?}: absolute paths are not allowed; use a path relative to the workspace"
                ));
            }
        }
    }
    // Existing prefixes must stay inside the workspace once symlinks are followed.
    let root_real = root
        .canonicalize()
        .map_err(|e| format!("the workspace is unavailable: {e}"))?;
    let mut probe = out.clone();
    loop {
        if probe.symlink_metadata().is_ok() {
            let real = probe
                .canonicalize()
                .map_err(|_| format!("{relative:?}: a link on the way leads nowhere"))?;
            if !real.starts_with(&root_real) {
                return Err(format!("{relative:?} leads out of the workspace"));
            }
            break;
        }
        if !probe.pop() || probe == *root {
            break;
        }
    }
    Ok(out)
}

/// `path` relative to `root`, `/`-separated.
pub fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(resolve(root, "a/b.txt").is_ok());
        assert!(resolve(root, "/etc/passwd").is_err());
        assert!(resolve(root, "../x").is_err());
        assert!(resolve(root, "a/../../x").is_err());
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        assert!(resolve(root, "out/passwd").is_err());
        assert!(resolve(root, "out").is_err());
        std::fs::create_dir(root.join("in")).unwrap();
        std::os::unix::fs::symlink(root.join("in"), root.join("inner")).unwrap();
        assert!(resolve(root, "inner/x").is_ok());
    }
}
