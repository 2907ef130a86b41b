//! Blobs in an S3-compatible object store (distributed mode; the `object_store` crate), shared
//! by every ingest-service replica. An object appears whole or not at all: a small blob is
//! one PUT when it is finished, a large one a multipart upload completed then (aborted when
//! the writer is dropped unfinished).

use std::sync::Arc;
use std::time::Duration;

use docchat_common::config::{Config, s3_location};
use docchat_common::error::{ApiError, ApiResult};
use futures::TryStreamExt;
use futures::stream::BoxStream;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
use object_store::client::HttpRequestBody;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, RetryConfig, WriteMultipart};
use secrecy::ExposeSecret;

/// Blobs up to this size are buffered and stored with one PUT; larger ones are uploaded in
/// parts of this size as they arrive.
const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one blob in flight at once (bounds a writer's memory to about 3 parts).
const PARTS_IN_FLIGHT: usize = 2;

#[derive(Clone, Debug)]
pub struct S3Blobs {
    store: Arc<AmazonS3>,
    /// `<prefix>/` or empty.
    prefix: String,
}

pub struct S3Writer {
    store: Arc<AmazonS3>,
    path: Path,
    buffer: Vec<u8>,
    /// Started once the blob outgrows one part.
    upload: Option<WriteMultipart>,
}

impl S3Blobs {
    /// The store `blob_url` names, checked by writing and removing a probe object; a missing
    /// bucket is created first (any other refusal stops the start with the store's answer).
    pub async fn open(blob_url: &str, config: &Config) -> anyhow::Result<S3Blobs> {
        let (bucket, prefix) = s3_location(blob_url)
            .ok_or_else(|| anyhow::anyhow!("DOCCHAT_BLOB_URL must be s3://<bucket>[/<prefix>]"))?;
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            // Requests made for a user fail within seconds, never after minutes of retries.
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(15),
                ..RetryConfig::default()
            });
        if let Some(endpoint) = &config.s3_endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        if let Some(region) = &config.s3_region {
            builder = builder.with_region(region);
        }
        if let Some(key) = &config.s3_access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &config.s3_secret_access_key {
            builder = builder.with_secret_access_key(secret.expose_secret());
        }
        let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
        let region = builder
            .get_config_value(&AmazonS3ConfigKey::Region)
            .unwrap_or_else(|| "us-east-1".into());
        let store = Arc::new(builder.build()?);
        let blobs = S3Blobs {
            store,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
        };
        if let Err(first) = blobs.probe().await {
            let base = endpoint.unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
            create_bucket(&blobs.store, &base, bucket, &region)
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "the object store {blob_url} refused a write ({first}) and creating the bucket failed: {e}"
                    )
                })?;
            tracing::info!(bucket, "created the blob store's bucket");
            blobs
                .probe()
                .await
                .map_err(|e| anyhow::anyhow!("the object store {blob_url} refused a write: {e}"))?;
        }
        Ok(blobs)
    }

    async fn probe(&self) -> object_store::Result<()> {
        let path = self.key(&format!(".probe/{}", docchat_common::ids::new_id()));
        self.store
            .put(&path, PutPayload::from_static(b"docchat"))
            .await?;
        self.store.delete(&path).await
    }

    fn key(&self, id: &str) -> Path {
        Path::from(format!("{}{id}", self.prefix))
    }

    pub fn writer(&self, id: &str) -> S3Writer {
        S3Writer {
            store: self.store.clone(),
            path: self.key(id),
            buffer: Vec::new(),
            upload: None,
        }
    }

    pub async fn read(&self, id: &str) -> ApiResult<Vec<u8>> {
        let got = self
            .store
            .get(&self.key(id))
            .await
            .map_err(|e| read_error(id, e))?;
        let bytes = got.bytes().await.map_err(|e| read_error(id, e))?;
        Ok(bytes.to_vec())
    }

    /// The object's bytes in pieces of `piece` bytes (the last one shorter), whatever sizes
    /// the store sends them in.
    pub async fn stream(
        &self,
        id: &str,
        piece: usize,
    ) -> ApiResult<BoxStream<'static, ApiResult<Vec<u8>>>> {
        let got = self
            .store
            .get(&self.key(id))
            .await
            .map_err(|e| read_error(id, e))?;
        let id = id.to_owned();
        let body = got.into_stream().map_err(move |e| read_error(&id, e));
        Ok(Box::pin(rechunk(body, piece)))
    }

    /// Objects directly under the prefix (the probes' `.probe/` is a folder, not listed).
    pub async fn ids(&self) -> ApiResult<Vec<String>> {
        let prefix = Path::from(self.prefix.as_str());
        let listed = self
            .store
            .list_with_delimiter((!self.prefix.is_empty()).then_some(&prefix))
            .await
            .map_err(|e| ApiError::internal("listing blobs", e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| o.location.filename().map(str::to_owned))
            .collect())
    }

    pub async fn delete(&self, id: &str) -> ApiResult<()> {
        match self.store.delete(&self.key(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ApiError::internal("deleting blob", e)),
        }
    }
}

fn read_error(id: &str, e: object_store::Error) -> ApiError {
    match e {
        object_store::Error::NotFound { .. } => ApiError::not_found(format!("blob {id} not found")),
        e => ApiError::internal("reading blob", e),
    }
}

/// Byte pieces of any sizes → pieces of exactly `piece` bytes, the last one shorter.
fn rechunk<S>(body: S, piece: usize) -> impl futures::Stream<Item = ApiResult<Vec<u8>>>
where
    S: futures::Stream<Item = ApiResult<bytes::Bytes>> + Unpin,
{
    futures::stream::try_unfold(
        (body, Vec::with_capacity(piece), false),
        move |(mut body, mut pending, mut ended)| async move {
            while !ended && pending.len() < piece {
                match body.try_next().await? {
                    Some(bytes) => pending.extend_from_slice(&bytes),
                    None => ended = true,
                }
            }
            if pending.is_empty() {
                return Ok(None);
            }
            let rest = pending.split_off(pending.len().min(piece));
            Ok(Some((pending, (body, rest, ended))))
        },
    )
}

impl S3Writer {
    pub async fn write(&mut self, bytes: &[u8]) -> ApiResult<()> {
        if let Some(upload) = &mut self.upload {
            upload
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(|e| ApiError::internal("writing blob", e))?;
            upload.write(bytes);
            return Ok(());
        }
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() > PART_BYTES {
            let started = self
                .store
                .put_multipart(&self.path)
                .await
                .map_err(|e| ApiError::internal("starting blob upload", e))?;
            let mut upload = WriteMultipart::new_with_chunk_size(started, PART_BYTES);
            upload.write(&std::mem::take(&mut self.buffer));
            self.upload = Some(upload);
        }
        Ok(())
    }

    /// Stores the object: one PUT, or the multipart upload's completion.
    pub async fn finish(mut self) -> ApiResult<()> {
        match self.upload.take() {
            Some(upload) => upload
                .finish()
                .await
                .map(drop)
                .map_err(|e| ApiError::internal("storing blob", e)),
            None => self
                .store
                .put(
                    &self.path,
                    PutPayload::from(std::mem::take(&mut self.buffer)),
                )
                .await
                .map(drop)
                .map_err(|e| ApiError::internal("storing blob", e)),
        }
    }
}

impl Drop for S3Writer {
    fn drop(&mut self) {
        // An unfinished multipart upload keeps its parts (and their cost) until aborted.
        if let Some(upload) = self.upload.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                if let Err(e) = upload.abort().await {
                    tracing::warn!(error = %e, "aborting an unfinished blob upload");
                }
            });
        }
    }
}

/// CreateBucket (path style, SigV4 with the store's own credentials); an answer that the
/// bucket is already ours counts as done.
async fn create_bucket(
    store: &AmazonS3,
    endpoint: &str,
    bucket: &str,
    region: &str,
) -> anyhow::Result<()> {
    let credential = store.credentials().get_credential().await?;
    let body = if region == "us-east-1" {
        String::new()
    } else {
        format!(
            "<CreateBucketConfiguration><LocationConstraint>{region}</LocationConstraint></CreateBucketConfiguration>"
        )
    };
    let url = format!("{}/{bucket}", endpoint.trim_end_matches('/'));
    let mut request = http::Request::builder()
        .method(http::Method::PUT)
        .uri(&url)
        .body(HttpRequestBody::from(body.clone()))?;
    AwsAuthorizer::new(&credential, "s3", region).authorize(&mut request, None);
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()?
        .put(&url)
        .headers(request.headers().clone())
        .body(body)
        .send()
        .await?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() || text.contains("BucketAlreadyOwnedByYou") {
        Ok(())
    } else {
        anyhow::bail!("CreateBucket answered {status}: {}", text.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::rechunk;
    use futures::TryStreamExt;

    #[tokio::test]
    async fn pieces_have_the_asked_size_whatever_arrives() {
        let arriving = [vec![1u8; 3], vec![2; 10], vec![], vec![3; 4]];
        let body = futures::stream::iter(arriving.into_iter().map(|v| Ok(bytes::Bytes::from(v))));
        let pieces: Vec<Vec<u8>> = rechunk(body, 5).try_collect().await.unwrap();
        let sizes: Vec<usize> = pieces.iter().map(Vec::len).collect();
        assert_eq!(sizes, [5, 5, 5, 2]);
        assert_eq!(pieces.concat().len(), 17);
        let empty =
            futures::stream::iter(Vec::<docchat_common::error::ApiResult<bytes::Bytes>>::new());
        let none: Vec<Vec<u8>> = rechunk(empty, 5).try_collect().await.unwrap();
        assert!(none.is_empty());
    }
}
