//! Session files on disk: the files of a session's workspace (data_dir/agent/workspaces/
//! <session_id>) and their directory stats. Walks never follow symlinks (symlink_metadata,
//! a link is listed as what it is, never entered) and are bounded in depth and entries, so
//! a run cannot make a listing unbounded.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use docchat_proto::agent::v1 as pb;
use sha2::{Digest, Sha256};

/// At most this many entries are visited per walk; deeper trees are cut off.
pub const MAX_ENTRIES: usize = 20_000;
/// At most this deep below the walked directory.
pub const MAX_DEPTH: usize = 32;

/// A stable id of a session's file: a UUID from the hash of session and path (until files
/// become documents and carry theirs).
pub fn file_id(session_id: &str, rel: &str) -> String {
    let mut h = Sha256::new();
    h.update(session_id.as_bytes());
    h.update([0]);
    h.update(rel.as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

fn secs(t: std::io::Result<SystemTime>) -> Option<f64> {
    t.ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

struct Times {
    created: f64,
    modified: f64,
}

fn times(meta: &std::fs::Metadata) -> Times {
    let modified = secs(meta.modified()).unwrap_or(0.0);
    // Not every filesystem records a birth time: the modification time stands in.
    let created = secs(meta.created()).unwrap_or(modified);
    Times { created, modified }
}

fn owner_and_mode(meta: &std::fs::Metadata) -> (String, u32) {
    use std::os::unix::fs::MetadataExt;
    let uid = meta.uid();
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string());
    (owner, meta.mode())
}

/// A regular file's length; 0 for directories and links (a link's length is its target's).
fn size(m: &std::fs::Metadata) -> i64 {
    if m.is_file() { m.len() as i64 } else { 0 }
}

/// Every entry under `root` (relative path, bytes, metadata), sorted by path; none
/// when `root` does not exist.
pub fn walk(root: &Path) -> Vec<(String, std::fs::Metadata)> {
    let mut out: Vec<(String, std::fs::Metadata)> = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                tracing::warn!(root = %root.display(), "workspace walk cut off at {MAX_ENTRIES} entries");
                out.sort_by(|a, b| a.0.cmp(&b.0));
                return out;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            out.push((rel.to_string_lossy().into_owned(), meta.clone()));
            if meta.is_dir() && depth + 1 < MAX_DEPTH {
                stack.push((path, depth + 1));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Hidden files and caches (a path part starting with `.`, `__pycache__`): the tools'
/// working files (matplotlib's and fontconfig's caches under `.cache`, say), not the agent's
/// output. They are neither listed nor stored (directory stats still count them).
pub fn working_file(rel: &str) -> bool {
    rel.split('/')
        .any(|part| part.starts_with('.') || part == "__pycache__")
}

/// The regular files of a workspace, as the API lists them (not its working files).
pub fn list(session_id: &str, root: &Path) -> Vec<pb::SessionFile> {
    walk(root)
        .into_iter()
        .filter(|(rel, m)| m.is_file() && !working_file(rel))
        .map(|(rel, m)| pb::SessionFile {
            id: file_id(session_id, &rel),
            bytes: m.len() as i64,
            created_at: times(&m).created as i64,
            filename: rel,
        })
        .collect()
}

/// Stats of directory `dir` named `id`; an empty directory's when it does not exist (a
/// session whose runs wrote nothing yet).
/// A file kept as a document (the manifest) that this replica's disk may not hold: a session
/// continues on any replica, so its stats must not depend on which replica answers.
#[derive(Debug, Clone)]
pub struct StoredFile {
    /// Relative to the directory the stats are of, `/`-separated.
    pub path: String,
    pub size: i64,
    /// Unix seconds.
    pub stored_at: i64,
}

/// The stats of `dir` as on this disk, plus the `stored` files the disk lacks (and the
/// directories they sit in).
pub fn stats(id: &str, dir: &Path, detailed: bool, stored: &[StoredFile]) -> pb::DirectoryStats {
    let meta = std::fs::symlink_metadata(dir).ok().filter(|m| m.is_dir());
    let (mut created, mut modified) = (0.0, 0.0);
    let (mut owner, mut mode) = (String::new(), 0o40755);
    if let Some(m) = &meta {
        let t = times(m);
        (created, modified) = (t.created, t.modified);
        (owner, mode) = owner_and_mode(m);
    }
    let entries = if meta.is_some() {
        walk(dir)
    } else {
        Vec::new()
    };
    let mut stats = pb::DirectoryStats {
        id: id.to_owned(),
        created_timestamp: created,
        modified_timestamp: modified,
        detailed,
        owner,
        mode,
        ..Default::default()
    };
    for (rel, m) in &entries {
        let top = !rel.contains('/');
        if m.is_dir() {
            stats.directory_count += 1;
        } else {
            stats.file_count += 1;
            stats.size_bytes += size(m);
        }
        let t = times(m);
        stats.modified_timestamp = stats.modified_timestamp.max(t.modified);
        if top {
            stats.top_level_contents.push(rel.clone());
        }
        if detailed {
            let (owner, mode) = owner_and_mode(m);
            stats.files.push(pb::FileStats {
                name: rel.rsplit('/').next().unwrap_or(rel).to_owned(),
                path: rel.clone(),
                size_bytes: size(m),
                created_timestamp: t.created,
                modified_timestamp: t.modified,
                is_directory: m.is_dir(),
                sha256: None,
                owner,
                mode,
            });
        }
    }
    let present: std::collections::HashSet<&str> =
        entries.iter().map(|(r, _)| r.as_str()).collect();
    let mut new_dirs = std::collections::BTreeSet::new();
    for f in stored.iter().filter(|f| !present.contains(f.path.as_str())) {
        stats.file_count += 1;
        stats.size_bytes += f.size;
        let at = f.stored_at as f64;
        stats.modified_timestamp = stats.modified_timestamp.max(at);
        let mut parent = f.path.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            if !present.contains(up) {
                new_dirs.insert(up.to_owned());
            }
            parent = up;
        }
        let top = f.path.split('/').next().unwrap_or(&f.path);
        if !stats.top_level_contents.iter().any(|t| t == top) {
            stats.top_level_contents.push(top.to_owned());
        }
        if detailed {
            stats.files.push(pb::FileStats {
                name: f.path.rsplit('/').next().unwrap_or(&f.path).to_owned(),
                path: f.path.clone(),
                size_bytes: f.size,
                created_timestamp: at,
                modified_timestamp: at,
                is_directory: false,
                sha256: None,
                owner: String::new(),
                mode: 0o100_644,
            });
        }
    }
    stats.directory_count += new_dirs.len() as i64;
    stats.top_level_contents.sort();
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_files_this_disk_lacks_count_in_the_stats() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("out")).unwrap();
        std::fs::write(ws.path().join("out/a.txt"), b"12345").unwrap();
        let stored = |path: &str, size| StoredFile {
            path: path.into(),
            size,
            stored_at: 1_700_000_000,
        };
        // out/a.txt is on disk (counted once); the chart and the nested file only stored.
        let s = stats(
            "s1",
            ws.path(),
            true,
            &[
                stored("out/a.txt", 5),
                stored("chart.png", 100),
                stored("deep/er/b.txt", 7),
            ],
        );
        assert_eq!((s.file_count, s.directory_count, s.size_bytes), (3, 3, 112));
        assert_eq!(s.top_level_contents, ["chart.png", "deep", "out"]);
        let chart = s.files.iter().find(|f| f.path == "chart.png").unwrap();
        assert_eq!(
            (chart.size_bytes, chart.modified_timestamp),
            (100, 1_700_000_000.0)
        );
        // A replica that never ran the session: everything from the manifest.
        let s = stats(
            "s1",
            &ws.path().join("missing"),
            false,
            &[stored("chart.png", 100)],
        );
        assert_eq!((s.file_count, s.size_bytes), (1, 100));
        assert!(s.files.is_empty(), "not detailed");
    }

    #[test]
    fn walks_files_without_following_links_out() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"xxxxxxxx").unwrap();
        std::fs::create_dir(ws.path().join("notes")).unwrap();
        std::fs::write(ws.path().join("notes/plan.md"), b"hello").unwrap();
        std::fs::create_dir_all(ws.path().join(".cache/fontconfig")).unwrap();
        std::fs::write(ws.path().join(".cache/fontconfig/x.cache-9"), b"c").unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap();
        let files = list("s1", ws.path());
        let names: Vec<_> = files.iter().map(|f| f.filename.as_str()).collect();
        assert_eq!(
            names,
            ["notes/plan.md"],
            "links and working files are not listed"
        );
        assert_eq!(files[0].bytes, 5);
        assert_eq!(files[0].id, file_id("s1", "notes/plan.md"));
        let s = stats("s1", ws.path(), true, &[]);
        // Stats measure the directory as it is, working files too.
        assert_eq!((s.file_count, s.directory_count, s.size_bytes), (3, 3, 6));
        assert_eq!(s.top_level_contents, [".cache", "notes", "out"]);
        assert!(s.files.iter().all(|f| f.path != "out/secret"));
    }
}
