//! The blob store: uploaded files on a local directory (a volume in distributed mode).
//! Files are written under `tmp/` and renamed into place, so a reader never sees half a file.

use std::path::PathBuf;

use docchat_common::error::{ApiError, ApiResult};
use futures::Stream;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Debug)]
pub struct BlobStore {
    root: PathBuf,
}

/// A blob being written; dropped without [`BlobWriter::finish`], its temp file is removed.
pub struct BlobWriter {
    file: Option<tokio::fs::File>,
    tmp: PathBuf,
    hasher: Sha256,
    size: u64,
}

impl BlobStore {
    pub fn new(root: impl Into<PathBuf>) -> std::io::Result<BlobStore> {
        let root = root.into();
        std::fs::create_dir_all(root.join("tmp"))?;
        Ok(BlobStore { root })
    }

    fn path(&self, id: &str) -> ApiResult<PathBuf> {
        // Ids are UUIDs we minted; anything else must not become a path.
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(ApiError::not_found(format!("blob {id} not found")));
        }
        Ok(self.root.join(id))
    }

    pub async fn writer(&self) -> ApiResult<BlobWriter> {
        let tmp = self.root.join("tmp").join(uuid::Uuid::new_v4().to_string());
        let file = tokio::fs::File::create(&tmp)
            .await
            .map_err(|e| ApiError::internal("creating blob", e))?;
        Ok(BlobWriter {
            file: Some(file),
            tmp,
            hasher: Sha256::new(),
            size: 0,
        })
    }

    pub async fn read(&self, id: &str) -> ApiResult<Vec<u8>> {
        let path = self.path(id)?;
        tokio::fs::read(&path).await.map_err(|e| read_error(id, e))
    }

    /// A blob's bytes in order, read from its file as the stream is polled (never held
    /// whole): pieces of `piece` bytes, the last one shorter. NOT_FOUND when the blob is
    /// missing (checked now, before the stream is handed out).
    pub async fn stream(
        &self,
        id: &str,
        piece: usize,
    ) -> ApiResult<impl Stream<Item = ApiResult<Vec<u8>>> + Send + 'static + use<>> {
        let path = self.path(id)?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| read_error(id, e))?;
        let piece = piece.max(1);
        Ok(futures::stream::try_unfold(
            file,
            move |mut file| async move {
                let mut buf = vec![0u8; piece];
                let mut filled = 0;
                while filled < piece {
                    let n = file
                        .read(&mut buf[filled..])
                        .await
                        .map_err(|e| ApiError::internal("reading blob", e))?;
                    if n == 0 {
                        break;
                    }
                    filled += n;
                }
                if filled == 0 {
                    return Ok(None);
                }
                buf.truncate(filled);
                Ok(Some((buf, file)))
            },
        ))
    }

    pub async fn delete(&self, id: &str) -> ApiResult<()> {
        let path = self.path(id)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ApiError::internal("deleting blob", e)),
        }
    }
}

fn read_error(id: &str, e: std::io::Error) -> ApiError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ApiError::not_found(format!("blob {id} not found"))
    } else {
        ApiError::internal("reading blob", e)
    }
}

impl BlobWriter {
    pub async fn write(&mut self, bytes: &[u8]) -> ApiResult<()> {
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| ApiError::internal("writing blob", "already finished"))?;
        file.write_all(bytes)
            .await
            .map_err(|e| ApiError::internal("writing blob", e))?;
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Flushes and moves the file into place as `id`; returns its SHA-256.
    pub async fn finish(mut self, store: &BlobStore, id: &str) -> ApiResult<String> {
        let mut file = self
            .file
            .take()
            .ok_or_else(|| ApiError::internal("finishing blob", "already finished"))?;
        file.flush()
            .await
            .map_err(|e| ApiError::internal("flushing blob", e))?;
        file.sync_all()
            .await
            .map_err(|e| ApiError::internal("syncing blob", e))?;
        drop(file);
        let dest = store.path(id)?;
        tokio::fs::rename(&self.tmp, &dest)
            .await
            .map_err(|e| ApiError::internal("storing blob", e))?;
        Ok(hex::encode(std::mem::take(&mut self.hasher).finalize()))
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
