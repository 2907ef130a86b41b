//! The blob store: the bytes of uploads and agent files, by id. Two backends behind one
//! interface: a local directory (standalone; `local.rs`) and an S3-compatible object store
//! that every replica shares (distributed, `DOCCHAT_BLOB_URL=s3://…`; `s3.rs`). Either way a
//! blob is visible whole or not at all, and a writer dropped unfinished leaves nothing.

mod local;
mod s3;

use docchat_common::config::Config;
use docchat_common::error::{ApiError, ApiResult};
use futures::stream::BoxStream;
use sha2::{Digest, Sha256};

use local::{LocalBlobs, LocalWriter};
use s3::{S3Blobs, S3Writer};

#[derive(Clone, Debug)]
pub struct BlobStore {
    backend: Backend,
}

#[derive(Clone, Debug)]
enum Backend {
    Local(LocalBlobs),
    S3(S3Blobs),
}

/// A blob being written under the id it was opened with; see [`BlobWriter::finish`].
pub struct BlobWriter {
    sink: Sink,
    hasher: Sha256,
    size: u64,
}

enum Sink {
    Local(LocalWriter),
    S3(S3Writer),
}

impl BlobStore {
    /// The configured store: `blob_url` (S3, checked with a probe write) or
    /// `<data_dir>/blobs`.
    pub async fn open(config: &Config) -> anyhow::Result<BlobStore> {
        let backend = match &config.blob_url {
            Some(url) => Backend::S3(S3Blobs::open(url, config).await?),
            None => Backend::Local(LocalBlobs::new(config.data_dir.join("blobs"))?),
        };
        Ok(BlobStore { backend })
    }

    /// `local` or `s3`, for logs.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Local(_) => "local",
            Backend::S3(_) => "s3",
        }
    }

    /// A writer of the new blob `id`.
    pub async fn writer(&self, id: &str) -> ApiResult<BlobWriter> {
        check_id(id)?;
        let sink = match &self.backend {
            Backend::Local(b) => Sink::Local(b.writer(id).await?),
            Backend::S3(b) => Sink::S3(b.writer(id)),
        };
        Ok(BlobWriter {
            sink,
            hasher: Sha256::new(),
            size: 0,
        })
    }

    pub async fn read(&self, id: &str) -> ApiResult<Vec<u8>> {
        check_id(id)?;
        match &self.backend {
            Backend::Local(b) => b.read(id).await,
            Backend::S3(b) => b.read(id).await,
        }
    }

    /// A blob's bytes in order, fetched as the stream is polled (never held whole): pieces
    /// of `piece` bytes, the last one shorter. NOT_FOUND when the blob is missing (checked
    /// now, before the stream is handed out).
    pub async fn stream(
        &self,
        id: &str,
        piece: usize,
    ) -> ApiResult<BoxStream<'static, ApiResult<Vec<u8>>>> {
        check_id(id)?;
        let piece = piece.max(1);
        match &self.backend {
            Backend::Local(b) => b.stream(id, piece).await,
            Backend::S3(b) => b.stream(id, piece).await,
        }
    }

    /// The ids of every stored blob (not those being written), for checks and sweeps.
    pub async fn ids(&self) -> ApiResult<Vec<String>> {
        match &self.backend {
            Backend::Local(b) => b.ids().await,
            Backend::S3(b) => b.ids().await,
        }
    }

    /// Removes a blob; one already gone is not an error.
    pub async fn delete(&self, id: &str) -> ApiResult<()> {
        check_id(id)?;
        match &self.backend {
            Backend::Local(b) => b.delete(id).await,
            Backend::S3(b) => b.delete(id).await,
        }
    }
}

/// Ids are UUIDs we minted; anything else must not become a path or a key.
fn check_id(id: &str) -> ApiResult<()> {
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(ApiError::not_found(format!("blob {id} not found")));
    }
    Ok(())
}

impl BlobWriter {
    pub async fn write(&mut self, bytes: &[u8]) -> ApiResult<()> {
        match &mut self.sink {
            Sink::Local(w) => w.write(bytes).await?,
            Sink::S3(w) => w.write(bytes).await?,
        }
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the blob visible under its id; returns its SHA-256 (hex).
    pub async fn finish(self) -> ApiResult<String> {
        match self.sink {
            Sink::Local(w) => w.finish().await?,
            Sink::S3(w) => w.finish().await?,
        }
        Ok(hex::encode(self.hasher.finalize()))
    }
}
