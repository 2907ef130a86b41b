//! Uploaded ZIP archives (custom tools, custom agents, MCP packages), checked before
//! anything is written: every entry must be a plain file or directory with a relative path
//! that stays inside (no absolute paths, no `..`, no symlinks, no NUL or backslash), no
//! setuid, setgid or sticky bit, and at least one file; the entry count, each entry's size, the declared total and the compression ratio are capped
//! (a bomb is refused, not truncated). Extraction reads each entry through `take()` (a
//! header that lies about its size is caught) into a temporary sibling directory renamed
//! into place, so a refused archive leaves nothing behind.

use std::collections::HashSet;
use std::io::{Cursor, Read, Write};
use std::path::{Component, Path, PathBuf};

use zip::ZipArchive;

/// Caps on one archive.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: usize,
    /// Uncompressed bytes of one entry.
    pub max_entry: u64,
    /// Uncompressed bytes of all entries together.
    pub max_total: u64,
    /// Uncompressed / compressed of one entry larger than 1 MiB.
    pub max_ratio: u64,
}

impl Limits {
    /// A tool or agent upload (20 MB compressed).
    pub const UPLOAD: Limits = Limits {
        max_entries: 10_000,
        max_entry: 100 << 20,
        max_total: 200 << 20,
        max_ratio: 200,
    };
}

/// Why an archive was refused, for the uploader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArchiveError(pub String);

fn refuse(msg: impl Into<String>) -> ArchiveError {
    ArchiveError(msg.into())
}

/// One checked entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative, `/`-separated, without a trailing slash.
    pub path: String,
    pub is_dir: bool,
    /// Declared uncompressed size.
    pub size: u64,
    /// The owner-execute bit was set.
    pub executable: bool,
}

/// A relative path that stays inside, or why not.
fn safe_path(raw: &str) -> Result<String, ArchiveError> {
    if raw.contains('\0') || raw.contains('\\') {
        return Err(refuse(format!(
            "the archive entry {raw:?} has a NUL or backslash in its name"
        )));
    }
    let trimmed = raw.trim_end_matches('/');
    let path = Path::new(trimmed);
    if trimmed.is_empty() {
        return Err(refuse("the archive has an entry without a name"));
    }
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(refuse(format!(
                    "the archive entry {raw:?} climbs out with '..'"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse(format!(
                    "the archive entry {raw:?} has an absolute path"
                )));
            }
        }
    }
    if parts.is_empty() {
        return Err(refuse(format!("the archive entry {raw:?} names no file")));
    }
    Ok(parts.join("/"))
}

/// Checks every entry of the ZIP in `bytes` against `limits`, writing nothing.
pub fn check(bytes: &[u8], limits: &Limits) -> Result<Vec<Entry>, ArchiveError> {
    let mut zip = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| refuse(format!("the file is not a readable ZIP archive ({e})")))?;
    if zip.len() > limits.max_entries {
        return Err(refuse(format!(
            "the archive has {} entries; at most {} are accepted",
            zip.len(),
            limits.max_entries
        )));
    }
    let mut entries = Vec::with_capacity(zip.len());
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| refuse(format!("the archive's entry {i} is unreadable ({e})")))?;
        let raw = f
            .name()
            .map_err(|e| refuse(format!("the archive's entry {i} has a bad name ({e})")))?
            .into_owned();
        let path = safe_path(&raw)?;
        if f.is_symlink() {
            return Err(refuse(format!(
                "the archive entry {raw:?} is a symbolic link; links are not accepted"
            )));
        }
        let is_dir = f.is_dir();
        let size = f.size();
        if !is_dir {
            if size > limits.max_entry {
                return Err(refuse(format!(
                    "the archive entry {raw:?} unpacks to {size} bytes; at most {} per file",
                    limits.max_entry
                )));
            }
            let packed = f.compressed_size().max(1);
            if size > (1 << 20) && size / packed > limits.max_ratio {
                return Err(refuse(format!(
                    "the archive entry {raw:?} is compressed {}:1, like a ZIP bomb; refused",
                    size / packed
                )));
            }
            total = total.saturating_add(size);
            if total > limits.max_total {
                return Err(refuse(format!(
                    "the archive unpacks to more than {} bytes; refused",
                    limits.max_total
                )));
            }
        }
        if !seen.insert(path.clone()) && !is_dir {
            return Err(refuse(format!("the archive holds {path:?} twice")));
        }
        // The reader clears these bits from `unix_mode`; the archive asked for them.
        let mode = f.external_attributes() >> 16;
        if f.system() == zip::System::Unix && mode & 0o7000 != 0 {
            return Err(refuse(format!(
                "the archive entry {raw:?} has the setuid, setgid or sticky bit (mode {:o}); refused",
                mode & 0o7777
            )));
        }
        let executable = f.unix_mode().is_some_and(|m| m & 0o100 != 0);
        entries.push(Entry {
            path,
            is_dir,
            size,
            executable,
        });
    }
    if entries.iter().all(|e| e.is_dir) {
        return Err(refuse("the archive holds no files"));
    }
    // A file may not also be a directory of another entry's path.
    let files: HashSet<&str> = entries
        .iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.path.as_str())
        .collect();
    for e in &entries {
        let mut prefix = e.path.as_str();
        while let Some((parent, _)) = prefix.rsplit_once('/') {
            if files.contains(parent) {
                return Err(refuse(format!(
                    "the archive entry {:?} lies inside the file {parent:?}",
                    e.path
                )));
            }
            prefix = parent;
        }
    }
    Ok(entries)
}

/// Checks `bytes` and extracts it into `dest` (which must not exist yet): nothing is left
/// behind when the archive is refused or writing fails.
pub fn extract(bytes: &[u8], dest: &Path, limits: &Limits) -> Result<Vec<Entry>, ArchiveError> {
    let entries = check(bytes, limits)?;
    let parent = dest
        .parent()
        .ok_or_else(|| refuse("no directory to extract into"))?;
    std::fs::create_dir_all(parent).map_err(|e| refuse(format!("cannot extract: {e}")))?;
    let tmp = parent.join(format!(
        ".{}.{}.partial",
        dest.file_name().unwrap_or_default().to_string_lossy(),
        docchat_common::ids::new_name()
    ));
    let written = write_all(bytes, &entries, &tmp).and_then(|()| {
        std::fs::rename(&tmp, dest).map_err(|e| refuse(format!("cannot extract: {e}")))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    Ok(entries)
}

fn write_all(bytes: &[u8], entries: &[Entry], root: &Path) -> Result<(), ArchiveError> {
    let io = |e: std::io::Error| refuse(format!("cannot extract: {e}"));
    std::fs::create_dir(root).map_err(io)?;
    let mut zip = ZipArchive::new(Cursor::new(bytes)).map_err(|e| refuse(e.to_string()))?;
    for (i, entry) in entries.iter().enumerate() {
        let target: PathBuf = root.join(&entry.path);
        if entry.is_dir {
            std::fs::create_dir_all(&target).map_err(io)?;
            continue;
        }
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let f = zip.by_index(i).map_err(|e| {
            refuse(format!(
                "the archive entry {:?} is unreadable ({e})",
                entry.path
            ))
        })?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(io)?;
        let copied = std::io::copy(&mut f.take(entry.size + 1), &mut out).map_err(|e| {
            refuse(format!(
                "the archive entry {:?} does not unpack ({e})",
                entry.path
            ))
        })?;
        if copied != entry.size {
            return Err(refuse(format!(
                "the archive entry {:?} unpacks to a size other than it declares",
                entry.path
            )));
        }
        out.flush().map_err(io)?;
        let mode = if entry.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(
            &target,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(mode),
        )
        .map_err(io)?;
    }
    Ok(())
}

/// Builds a ZIP of `(path, bytes)` entries (tests; the client's own archives).
#[expect(
    clippy::expect_used,
    reason = "writing to memory cannot fail but for a bug"
)]
pub fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (name, data) in files {
        out.start_file(*name, opts).expect("zip entry");
        out.write_all(data).expect("zip data");
    }
    out.finish().expect("zip").into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_plain_archive_extracts() {
        let bytes = zip_of(&[("pkg/server.py", b"print(1)"), ("pkg/data/a.txt", b"a")]);
        let tmp = dir();
        let dest = tmp.path().join("out");
        let entries = extract(&bytes, &dest, &Limits::UPLOAD).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            std::fs::read_to_string(dest.join("pkg/data/a.txt")).unwrap(),
            "a"
        );
    }

    fn refused(bytes: &[u8], want: &str) {
        let tmp = dir();
        let dest = tmp.path().join("out");
        let err = extract(bytes, &dest, &Limits::UPLOAD).unwrap_err();
        assert!(err.0.contains(want), "{err} lacks {want:?}");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "a refused archive left {left:?}");
    }

    #[test]
    fn escapes_links_and_bombs_are_refused_with_nothing_written() {
        refused(&zip_of(&[("ok.txt", b"x"), ("../evil.txt", b"x")]), "'..'");
        refused(&zip_of(&[("a/../../evil.txt", b"x")]), "'..'");
        refused(&zip_of(&[("/etc/evil", b"x")]), "absolute");
        refused(&zip_of(&[("a\\..\\evil", b"x")]), "backslash");

        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.add_symlink(
            "link",
            "/etc/passwd",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        refused(&w.finish().unwrap().into_inner(), "symbolic link");

        // 50 MiB of zeros deflates to ~50 KiB: a ratio no real upload has.
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.start_file(
            "zeros.bin",
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .large_file(true),
        )
        .unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..50 {
            w.write_all(&chunk).unwrap();
        }
        refused(&w.finish().unwrap().into_inner(), "ZIP bomb");

        refused(b"not a zip at all", "not a readable ZIP");
    }

    #[test]
    fn empty_archives_and_setuid_entries_are_refused() {
        refused(&zip_of(&[]), "no files");
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.add_directory("only-a-dir/", zip::write::SimpleFileOptions::default())
            .unwrap();
        refused(&w.finish().unwrap().into_inner(), "no files");
        for mode in [0o4755u32, 0o2755, 0o1644] {
            // The writer keeps only 0o777: set the mode in the central directory by hand.
            let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
            w.start_file(
                "server.py",
                zip::write::SimpleFileOptions::default().unix_permissions(0o755),
            )
            .unwrap();
            w.write_all(b"print(1)").unwrap();
            let mut bytes = w.finish().unwrap().into_inner();
            let at = bytes
                .windows(4)
                .position(|w| w == b"PK\x01\x02")
                .expect("a central directory header");
            let external = (0o100000 | mode) << 16;
            bytes[at + 38..at + 42].copy_from_slice(&external.to_le_bytes());
            refused(&bytes, "setuid, setgid or sticky");
        }
        // Plain modes still pass.
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.start_file(
            "run.sh",
            zip::write::SimpleFileOptions::default().unix_permissions(0o755),
        )
        .unwrap();
        w.write_all(b"true").unwrap();
        let entries = check(&w.finish().unwrap().into_inner(), &Limits::UPLOAD).unwrap();
        assert!(entries[0].executable);
    }

    #[test]
    fn a_file_cannot_be_a_directory_too() {
        refused(&zip_of(&[("a", b"x"), ("a/b", b"y")]), "inside the file");
    }
}
