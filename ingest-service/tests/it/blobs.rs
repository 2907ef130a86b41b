//! The blob store on both backends: a local directory (sqlite) and the S3-compatible server
//! of the real backend (scripts/s3-server.sh): round trips, multipart-sized blobs, writers
//! dropped unfinished, ids that are not ours, and two replicas sharing one store.

use docchat_common::testing::Backend;
use docchat_ingest_service::blobs::BlobStore;
use futures::TryStreamExt;
use sha2::{Digest, Sha256};

/// A store of its own for this test, as ingest-service opens it.
async fn store(
    backend: &Backend,
    dir: &std::path::Path,
) -> (BlobStore, docchat_common::config::Config) {
    let config = backend.config(dir);
    (BlobStore::open(&config).await.unwrap(), config)
}

fn id() -> String {
    docchat_common::ids::new_id()
}

/// Writes `bytes` in pieces of `piece` bytes; returns the SHA-256 `finish` reported.
async fn put(store: &BlobStore, id: &str, bytes: &[u8], piece: usize) -> String {
    let mut writer = store.writer(id).await.unwrap();
    for chunk in bytes.chunks(piece) {
        writer.write(chunk).await.unwrap();
    }
    assert_eq!(writer.size(), bytes.len() as u64);
    writer.finish().await.unwrap()
}

/// Bytes that differ everywhere, so a misplaced part shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Multipart uploads the S3 server still holds for the config's bucket (moto answers
/// ListMultipartUploads without a signature).
async fn open_uploads(config: &docchat_common::config::Config) -> usize {
    let (bucket, _) =
        docchat_common::config::s3_location(config.blob_url.as_deref().unwrap()).unwrap();
    let endpoint = config.s3_endpoint.as_deref().unwrap();
    let body = reqwest::get(format!("{endpoint}/{bucket}?uploads"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.matches("<Upload>").count()
}

docchat_common::backend_tests! {
    async fn blobs_round_trip_and_stream_in_pieces(backend) {
        let dir = tempfile::tempdir().unwrap();
        let (blobs, _) = store(&backend, dir.path()).await;
        assert_eq!(blobs.kind(), if backend.s3.is_some() { "s3" } else { "local" });
        let bytes = pattern(100_000);
        let id = id();
        let sha = put(&blobs, &id, &bytes, 30_000).await;
        assert_eq!(sha, hex::encode(Sha256::digest(&bytes)), "{}", backend.name);
        assert_eq!(blobs.read(&id).await.unwrap(), bytes);
        let pieces: Vec<Vec<u8>> = blobs.stream(&id, 65_536).await.unwrap().try_collect().await.unwrap();
        let sizes: Vec<usize> = pieces.iter().map(Vec::len).collect();
        assert_eq!(sizes, [65_536, 34_464], "{}", backend.name);
        assert_eq!(pieces.concat(), bytes);
        assert_eq!(blobs.ids().await.unwrap(), std::slice::from_ref(&id), "{}", backend.name);

        // An empty blob is a blob.
        let empty = self::id();
        put(&blobs, &empty, b"", 1).await;
        assert_eq!(blobs.read(&empty).await.unwrap(), b"");
        let none: Vec<Vec<u8>> = blobs.stream(&empty, 10).await.unwrap().try_collect().await.unwrap();
        assert!(none.is_empty());

        blobs.delete(&id).await.unwrap();
        assert_eq!(blobs.read(&id).await.unwrap_err().code.http_status(), 404);
        assert_eq!(blobs.stream(&id, 10).await.err().unwrap().code.http_status(), 404);
        blobs.delete(&id).await.unwrap(); // already gone: not an error
        assert_eq!(blobs.ids().await.unwrap(), [empty]);
    }
}

docchat_common::backend_tests! {
    /// Larger than one part (8 MiB): on S3 a multipart upload, completed by `finish`.
    async fn blobs_larger_than_a_part_arrive_whole(backend) {
        let dir = tempfile::tempdir().unwrap();
        let (blobs, _) = store(&backend, dir.path()).await;
        let bytes = pattern(19 * 1024 * 1024 + 17);
        let id = id();
        let sha = put(&blobs, &id, &bytes, 1 << 20).await;
        assert_eq!(sha, hex::encode(Sha256::digest(&bytes)));
        let back = blobs.read(&id).await.unwrap();
        assert!(back == bytes, "{}: {} bytes came back of {}", backend.name, back.len(), bytes.len());
    }
}

docchat_common::backend_tests! {
    /// A writer dropped before `finish` (a refused or broken upload) leaves no blob, and on
    /// S3 no multipart upload holding parts.
    async fn dropped_writers_leave_nothing(backend) {
        let dir = tempfile::tempdir().unwrap();
        let (blobs, config) = store(&backend, dir.path()).await;
        let (small, large) = (id(), id());
        let mut w = blobs.writer(&small).await.unwrap();
        w.write(&pattern(1000)).await.unwrap();
        drop(w);
        let mut w = blobs.writer(&large).await.unwrap();
        for _ in 0..10 {
            w.write(&pattern(1 << 20)).await.unwrap();
        }
        drop(w);
        for id in [&small, &large] {
            assert_eq!(blobs.read(id).await.unwrap_err().code.http_status(), 404, "{}", backend.name);
        }
        assert!(blobs.ids().await.unwrap().is_empty());
        if backend.s3.is_some() {
            // The abort runs on a spawned task.
            let mut open = usize::MAX;
            for _ in 0..100 {
                open = open_uploads(&config).await;
                if open == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            assert_eq!(open, 0, "the unfinished multipart upload was aborted");
        } else {
            let tmp = dir.path().join("blobs/tmp");
            assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
        }
    }
}

docchat_common::backend_tests! {
    /// Only ids we minted name a blob: anything else is 404 and touches nothing.
    async fn foreign_ids_name_no_blob(backend) {
        let dir = tempfile::tempdir().unwrap();
        let (blobs, _) = store(&backend, dir.path()).await;
        for bad in ["", "../etc/passwd", ".probe/x", "a/b", "tmp"] {
            assert_eq!(blobs.read(bad).await.unwrap_err().code.http_status(), 404, "{bad:?}");
            assert_eq!(blobs.writer(bad).await.err().unwrap().code.http_status(), 404, "{bad:?}");
            assert_eq!(blobs.delete(bad).await.unwrap_err().code.http_status(), 404, "{bad:?}");
        }
    }
}

docchat_common::backend_tests! {
    /// Two replicas opened from one configuration share the store: what one writes the
    /// other reads and can delete (on S3 across processes; a local directory only on one
    /// machine).
    async fn replicas_share_one_store(backend) {
        let dir = tempfile::tempdir().unwrap();
        let (one, config) = store(&backend, dir.path()).await;
        let two = BlobStore::open(&config).await.unwrap();
        let id = id();
        put(&one, &id, b"written by replica one", 8).await;
        assert_eq!(two.read(&id).await.unwrap(), b"written by replica one");
        two.delete(&id).await.unwrap();
        assert_eq!(one.read(&id).await.unwrap_err().code.http_status(), 404);
    }
}

/// A store that cannot be reached stops the start with a message naming it (no hang: the
/// client retries 3 times within 15 s).
#[tokio::test]
async fn an_unreachable_object_store_fails_the_start_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = docchat_common::config::Config::for_test(dir.path());
    config.blob_url = Some("s3://docchat-unreachable".into());
    config.s3_endpoint = Some("http://127.0.0.1:9".into());
    config.s3_access_key_id = Some("k".into());
    config.s3_secret_access_key = Some(secrecy::SecretString::from("s"));
    let started = std::time::Instant::now();
    let err = BlobStore::open(&config).await.unwrap_err().to_string();
    assert!(err.contains("s3://docchat-unreachable"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
