//! The files of a session's workspace as documents of the session's owner (ARCHITECTURE.md
//! §7 "Agent files"). Before a run, [`Stored::restore`] brings the workspace up to its
//! manifest (files another replica stored, or a workspace this replica never had); after
//! the run's tool calls, [`Stored::sync`] stores every new or changed regular file through
//! ingest-service (PutAgentFile: a document with chat_session_id set, its bytes in the
//! blob store) and records it in the manifest. A file that left the workspace leaves the
//! manifest; its document stays (earlier turns' links keep working).
//!
//! Hidden files and `__pycache__` are working files and stay out. Links are never stored or followed, files with several hard links are refused (a link to
//! a file the sandbox could not read must not be read for it by the service), a run
//! stores at most [`MAX_FILES_PER_RUN`] files of at most [`MAX_FILE_BYTES`] each, and files
//! past the workspace's disk quota (`DOCCHAT_WORKSPACE_QUOTA_MB`, in path order) are not
//! stored.

pub mod manifest;
mod transfer;

pub use transfer::read as read_document;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use docchat_proto::ingest::v1::AgentFileMeta;
use sea_orm::DatabaseConnection;
use sha2::{Digest, Sha256};

use crate::paths;
use manifest::Entry;

/// The largest file stored as a document.
pub const MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// Files stored by one run, at most.
pub const MAX_FILES_PER_RUN: usize = 500;

/// What a local file was when last hashed: its hash is reused while size and mtime hold.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    size: u64,
    modified: Option<std::time::SystemTime>,
    sha256: String,
}

/// The workspace ↔ documents bridge of one replica.
pub struct Stored {
    db: DatabaseConnection,
    clients: Clients,
    /// Host path → the last hash taken of it.
    stamps: Mutex<HashMap<PathBuf, Stamp>>,
    /// A workspace's disk quota: files of a workspace past it are not stored.
    quota: u64,
}

/// What a sync stored, and what it could not.
#[derive(Debug, Default)]
pub struct Synced {
    pub files: Vec<pb::AgentFile>,
    pub notes: Vec<String>,
}

impl Stored {
    /// `quota`: a workspace's disk quota in bytes (files past it are not stored).
    pub fn new(db: DatabaseConnection, clients: Clients, quota: u64) -> Stored {
        Stored {
            db,
            clients,
            stamps: Mutex::default(),
            quota,
        }
    }

    /// The SHA-256 of a regular file, from its stamp while size and mtime are unchanged.
    async fn hash(&self, path: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let modified = meta.modified().ok();
        if let Some(s) = self.stamp(path)
            && s.size == meta.len()
            && s.modified == modified
            && modified.is_some()
        {
            return Some(s.sha256);
        }
        let p = path.to_path_buf();
        let sha = tokio::task::spawn_blocking(move || sha256_file(&p))
            .await
            .ok()??;
        self.stamps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                path.to_path_buf(),
                Stamp {
                    size: meta.len(),
                    modified,
                    sha256: sha.clone(),
                },
            );
        Some(sha)
    }

    fn stamp(&self, path: &Path) -> Option<Stamp> {
        self.stamps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .cloned()
    }

    /// Brings the workspace at `root` up to the session's manifest: a stored file missing
    /// here, or different, is fetched from its document. A document deleted meanwhile
    /// leaves the manifest. Answers notes for the run's history.
    pub async fn restore(
        &self,
        caller: &Caller,
        session_id: &str,
        root: &Path,
    ) -> ApiResult<Vec<String>> {
        let mut notes = Vec::new();
        for e in manifest::entries(&self.db, session_id).await? {
            let Ok(host) = paths::resolve(root, &e.path) else {
                notes.push(format!("{}: not restored (its path leads out)", e.path));
                continue;
            };
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.is_file() => {
                    if self.hash(&host, &m).await.as_deref() == Some(e.sha256.as_str()) {
                        continue;
                    }
                }
                Ok(_) => {
                    notes.push(format!("{}: not restored (no longer a file here)", e.path));
                    continue;
                }
                Err(_) => {}
            }
            match transfer::read(&self.clients, caller, &e.document_id, &host).await {
                Ok(_) => {
                    if let Ok(m) = std::fs::symlink_metadata(&host) {
                        self.hash(&host, &m).await;
                    }
                }
                Err(s) if s.code() == tonic::Code::NotFound => {
                    manifest::remove(&self.db, session_id, &e.path).await?;
                }
                Err(s) => return Err(s.into()),
            }
        }
        Ok(notes)
    }

    /// Stores the workspace's new and changed files (`question_id`'s run), forgetting those
    /// that left it when `prune`.
    pub async fn sync(
        &self,
        caller: &Caller,
        session_id: &str,
        question_id: &str,
        root: &Path,
        prune: bool,
    ) -> ApiResult<Synced> {
        let known: HashMap<String, Entry> = manifest::entries(&self.db, session_id)
            .await?
            .into_iter()
            .map(|e| (e.path.clone(), e))
            .collect();
        let walk_root = root.to_path_buf();
        let found = tokio::task::spawn_blocking(move || crate::files::walk(&walk_root))
            .await
            .map_err(|e| ApiError::internal("walking the workspace", e))?;
        let mut out = Synced::default();
        let mut seen = HashSet::new();
        let mut limit_reached = false;
        // Files past the workspace's quota are not stored (the sandbox stops the run that
        // passes it; files written otherwise are held to the same limit here).
        let mut budget = self.quota;
        for (rel, meta) in found {
            if !meta.is_file() || crate::files::working_file(&rel) {
                continue;
            }
            seen.insert(rel.clone());
            if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
                out.notes
                    .push(format!("{rel}: not stored (it has several hard links)"));
                continue;
            }
            if meta.len() > MAX_FILE_BYTES {
                out.notes.push(format!(
                    "{rel}: not stored (larger than {} MiB)",
                    MAX_FILE_BYTES / (1024 * 1024)
                ));
                continue;
            }
            let over_quota = budget < meta.len();
            budget = budget.saturating_sub(meta.len());
            let host = root.join(&rel);
            let Some(sha) = self.hash(&host, &meta).await else {
                continue;
            };
            let before = known.get(&rel);
            if before.is_some_and(|e| e.sha256 == sha) {
                continue;
            }
            if over_quota {
                out.notes.push(format!(
                    "{rel}: not stored (the workspace is past its disk quota of {} MiB)",
                    self.quota / (1024 * 1024)
                ));
                continue;
            }
            if before.is_none() && limit_reached {
                out.notes.push(format!(
                    "{rel}: not stored (the agent document limit was reached)"
                ));
                continue;
            }
            if out.files.len() >= MAX_FILES_PER_RUN {
                out.notes.push(format!(
                    "only {MAX_FILES_PER_RUN} files are stored per run; the rest were not"
                ));
                break;
            }
            let mut meta_msg = AgentFileMeta {
                chat_session_id: session_id.to_owned(),
                path: rel.clone(),
                document_id: before.map(|e| e.document_id.clone()).unwrap_or_default(),
            };
            let mut stored = transfer::put(&self.clients, caller, meta_msg.clone(), &host).await;
            if matches!(&stored, Err(s) if s.code() == tonic::Code::NotFound)
                && !meta_msg.document_id.is_empty()
            {
                // Its document was deleted: the file is stored anew.
                meta_msg.document_id.clear();
                stored = transfer::put(&self.clients, caller, meta_msg, &host).await;
            }
            let doc = match stored {
                Ok(doc) => doc,
                Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                    out.notes
                        .push(format!("{rel}: not stored ({})", s.message()));
                    limit_reached = true;
                    continue;
                }
                Err(s)
                    if matches!(
                        s.code(),
                        tonic::Code::InvalidArgument
                            | tonic::Code::FailedPrecondition
                            | tonic::Code::OutOfRange
                    ) =>
                {
                    out.notes
                        .push(format!("{rel}: not stored ({})", s.message()));
                    continue;
                }
                Err(s) => return Err(s.into()),
            };
            manifest::put(
                &self.db,
                session_id,
                &Entry {
                    path: rel.clone(),
                    document_id: doc.id.clone(),
                    sha256: sha,
                    size: meta.len() as i64,
                    question_id: question_id.to_owned(),
                    stored_at: 0,
                },
            )
            .await?;
            out.files.push(pb::AgentFile {
                document_id: doc.id,
                name: rel,
                size: meta.len() as i64,
            });
        }
        if prune {
            for path in known.keys().filter(|p| !seen.contains(*p)) {
                manifest::remove(&self.db, session_id, path).await?;
            }
        }
        Ok(out)
    }

    /// The session's stored files that an earlier question's run stored.
    pub async fn earlier(
        &self,
        session_id: &str,
        question_id: &str,
    ) -> ApiResult<Vec<pb::AgentFile>> {
        Ok(manifest::entries(&self.db, session_id)
            .await?
            .into_iter()
            .filter(|e| e.question_id != question_id)
            .map(|e| pb::AgentFile {
                document_id: e.document_id,
                name: e.path,
                size: e.size,
            })
            .collect())
    }

    /// The session's files as the API lists them: those on this replica's disk (`local`),
    /// named by the documents that hold them, and the stored ones this disk lacks (written
    /// on another replica).
    pub async fn list(
        &self,
        session_id: &str,
        mut local: Vec<pb::SessionFile>,
    ) -> ApiResult<Vec<pb::SessionFile>> {
        let mut stored: HashMap<String, Entry> = manifest::entries(&self.db, session_id)
            .await?
            .into_iter()
            .map(|e| (e.path.clone(), e))
            .collect();
        for f in &mut local {
            if let Some(e) = stored.remove(&f.filename) {
                f.id = e.document_id;
            }
        }
        local.extend(stored.into_values().map(|e| pb::SessionFile {
            id: e.document_id,
            filename: e.path,
            bytes: e.size,
            created_at: e.stored_at,
        }));
        local.sort_by(|a, b| a.filename.cmp(&b.filename));
        Ok(local)
    }

    /// Deletes the session's documents (the caller's) and forgets its manifest and stamps.
    pub async fn delete(&self, caller: &Caller, session_id: &str, root: &Path) -> ApiResult<()> {
        self.clients
            .ingest(caller)
            .delete_session_documents(docchat_proto::ingest::v1::SessionDocumentsRef {
                chat_session_id: session_id.to_owned(),
            })
            .await?;
        manifest::clear(&self.db, session_id).await?;
        self.stamps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p, _| !p.starts_with(root));
        Ok(())
    }
}

/// The SHA-256 of a file, hex; `None` when it cannot be read.
fn sha256_file(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Some(hex::encode(h.finalize()))
}
