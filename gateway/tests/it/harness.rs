//! What the REST tests share: docchat behind its gateway comes from the shared test stack
//! (`docchat_test_stack::Stack::docchat`, one builder for every suite); here only the
//! assertions.

use std::time::Duration;

pub use docchat_test_stack::{ADMIN_KEY, Stack, read};
use reqwest::Method;
use serde_json::{Value, json};

/// The error body of SPEC.md, exactly.
pub fn assert_error(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body}");
    let obj = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is an object: {body}"));
    assert_eq!(obj.len(), 2, "only code and message: {body}");
    assert_eq!(obj["code"], json!(want));
    assert!(!obj["message"].as_str().unwrap().is_empty());
}

pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sets a runtime setting as the administrator: `path` is `/api/v1/configurations/{name}`
/// or a user's `/api/v1/users/{id}/configurations/{name}`.
pub async fn configure(app: &Stack, path: &str, value: &str) {
    let (s, b) = app
        .call(
            Method::PUT,
            path,
            ADMIN_KEY,
            Some(json!({"string_value": value})),
        )
        .await;
    assert_eq!(s, 200, "{path}: {b}");
}

/// Sets the global runtime setting `name`.
pub async fn set_global(app: &Stack, name: &str, value: &str) {
    configure(app, &format!("/api/v1/configurations/{name}"), value).await;
}

/// A new collection of `key`'s: its id.
pub async fn collection(app: &Stack, key: &str) -> String {
    let (s, col) = app
        .call(
            Method::POST,
            "/api/v1/collections",
            key,
            Some(json!({"name": "kb", "description": ""})),
        )
        .await;
    assert_eq!(s, 201, "{col}");
    col["id"].as_str().unwrap().to_owned()
}

/// Uploads `bytes` as `name` and queues its ingestion into `key`'s collection `cid`.
pub async fn ingest(app: &Stack, key: &str, cid: &str, name: &str, bytes: Vec<u8>) {
    let (s, up) = crate::documents::upload(app, key, name, bytes).await;
    assert_eq!(s, 200, "{up}");
    let (s, b) = app
        .call(
            Method::POST,
            &format!(
                "/api/v1/uploads/{}/ingest?collection_id={cid}",
                up["id"].as_str().unwrap()
            ),
            key,
            None,
        )
        .await;
    assert_eq!(s, 204, "{b}");
}

/// Waits until `key`'s collection `cid` holds `total` documents.
pub async fn wait_documents(app: &Stack, key: &str, cid: &str, total: u64) {
    eventually("the documents are ingested", || async {
        let (_, c) = app
            .call(
                Method::GET,
                &format!("/api/v1/collections/{cid}"),
                key,
                None,
            )
            .await;
        c["document_count"] == total
    })
    .await;
}

/// Ingests `documents` (name, text) into `key`'s collection `cid`, then waits until it
/// holds `total` documents.
pub async fn ingest_texts(
    app: &Stack,
    key: &str,
    cid: &str,
    documents: &[(&str, &str)],
    total: u64,
) {
    for (name, text) in documents {
        ingest(app, key, cid, name, text.as_bytes().to_vec()).await;
    }
    wait_documents(app, key, cid, total).await;
}

/// A reply's metadata entry of `info_type`, parsed as JSON (it must have one).
pub async fn reply_meta(app: &Stack, key: &str, reply: &str, info_type: &str) -> Value {
    let (s, meta) = app
        .call(
            Method::GET,
            &format!("/api/v1/messages/{reply}/meta?info_type={info_type}"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{meta}");
    let content = meta[0]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no {info_type}: {meta}"));
    serde_json::from_str(content).unwrap()
}

/// The document names of a reply's references, best first.
pub async fn reference_names(app: &Stack, key: &str, reply: &str) -> Vec<String> {
    let (s, refs) = app
        .call(
            Method::GET,
            &format!("/api/v1/messages/{reply}/references"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{refs}");
    refs.as_array()
        .unwrap()
        .iter()
        .map(|r| r["document_name"].as_str().unwrap_or_default().to_owned())
        .collect()
}
