//! Blobs in a local directory (standalone mode): one file per blob, written under `tmp/`,
//! synced and renamed into place, so a reader never sees half a file.

use std::path::PathBuf;

use docchat_common::error::{ApiError, ApiResult};
use futures::stream::BoxStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Debug)]
pub struct LocalBlobs {
    root: PathBuf,
}

/// A blob being written; dropped without [`LocalWriter::finish`], its temp file is removed.
pub struct LocalWriter {
    file: Option<tokio::fs::File>,
    tmp: PathBuf,
    dest: PathBuf,
}

impl LocalBlobs {
    pub fn new(root: impl Into<PathBuf>) -> std::io::Result<LocalBlobs> {
        let root = root.into();
        std::fs::create_dir_all(root.join("tmp"))?;
        Ok(LocalBlobs { root })
    }

    pub async fn writer(&self, id: &str) -> ApiResult<LocalWriter> {
        let tmp = self.root.join("tmp").join(docchat_common::ids::new_id());
        let file = tokio::fs::File::create(&tmp)
            .await
            .map_err(|e| ApiError::internal("creating blob", e))?;
        Ok(LocalWriter {
            file: Some(file),
            tmp,
            dest: self.root.join(id),
        })
    }

    pub async fn read(&self, id: &str) -> ApiResult<Vec<u8>> {
        tokio::fs::read(self.root.join(id))
            .await
            .map_err(|e| read_error(id, e))
    }

    /// Pieces of `piece` bytes read from the file as the stream is polled (never held
    /// whole), the last one shorter.
    pub async fn stream(
        &self,
        id: &str,
        piece: usize,
    ) -> ApiResult<BoxStream<'static, ApiResult<Vec<u8>>>> {
        let file = tokio::fs::File::open(self.root.join(id))
            .await
            .map_err(|e| read_error(id, e))?;
        Ok(Box::pin(futures::stream::try_unfold(
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
        )))
    }

    pub async fn ids(&self) -> ApiResult<Vec<String>> {
        let listing = |e| ApiError::internal("listing blobs", e);
        let mut dir = tokio::fs::read_dir(&self.root).await.map_err(listing)?;
        let mut ids = Vec::new();
        while let Some(entry) = dir.next_entry().await.map_err(listing)? {
            if entry.file_type().await.map_err(listing)?.is_file() {
                ids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(ids)
    }

    pub async fn delete(&self, id: &str) -> ApiResult<()> {
        match tokio::fs::remove_file(self.root.join(id)).await {
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

impl LocalWriter {
    pub async fn write(&mut self, bytes: &[u8]) -> ApiResult<()> {
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| ApiError::internal("writing blob", "already finished"))?;
        file.write_all(bytes)
            .await
            .map_err(|e| ApiError::internal("writing blob", e))
    }

    /// Flushes, syncs and moves the file into place.
    pub async fn finish(mut self) -> ApiResult<()> {
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
        if let Err(e) = tokio::fs::rename(&self.tmp, &self.dest).await {
            let _ = tokio::fs::remove_file(&self.tmp).await;
            return Err(ApiError::internal("storing blob", e));
        }
        Ok(())
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
