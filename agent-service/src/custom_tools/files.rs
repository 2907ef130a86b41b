//! A tool's uploaded file on this replica's disk: `<root>/<id>-<sha 12>/`, made on first
//! use from the bytes in the database (a ZIP extracted by [`crate::archive::extract`], a
//! single file kept as is), so any replica can open any tool. The directory is written
//! under a temporary name and renamed into place: a reader never sees half of it.

use std::path::{Path, PathBuf};

use super::store::StoredFile;
use super::upload::extension;
use crate::archive::{self, Limits};

/// Where tool `id`'s file with hash `sha256` is materialized.
pub fn dir_of(root: &Path, id: &str, sha256: &str) -> PathBuf {
    let short = sha256.get(..12).unwrap_or(sha256);
    root.join(format!("{id}-{short}"))
}

/// The directory of tool `id`'s file, made when missing.
pub async fn materialize(root: &Path, id: &str, file: StoredFile) -> Result<PathBuf, String> {
    let dir = dir_of(root, id, &file.sha256);
    if dir.is_dir() {
        return Ok(dir);
    }
    let target = dir.clone();
    let done = tokio::task::spawn_blocking(move || write(&target, &file))
        .await
        .map_err(|e| format!("the tool's files: {e}"))?;
    match done {
        Ok(()) => Ok(dir),
        // Another run made it meanwhile.
        Err(_) if dir.is_dir() => Ok(dir),
        Err(e) => Err(e),
    }
}

fn write(dir: &Path, file: &StoredFile) -> Result<(), String> {
    if extension(&file.name) == ".zip" {
        return archive::extract(&file.data, dir, &Limits::UPLOAD)
            .map(|_| ())
            .map_err(|e| format!("the tool's archive: {e}"));
    }
    let parent = dir.parent().ok_or("no directory for the tool's files")?;
    let io = |e: std::io::Error| format!("the tool's files: {e}");
    std::fs::create_dir_all(parent).map_err(io)?;
    let tmp = parent.join(format!(".{}.partial", docchat_common::ids::new_name()));
    let name = Path::new(&file.name)
        .file_name()
        .map(|n| n.to_owned())
        .ok_or("the tool's file has no name")?;
    let written = std::fs::create_dir(&tmp)
        .and_then(|()| std::fs::write(tmp.join(name), &file.data))
        .and_then(|()| std::fs::rename(&tmp, dir));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// Removes tool `id`'s directories on this replica (after a delete; best effort).
pub fn forget(root: &Path, id: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let prefix = format!("{id}-");
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
