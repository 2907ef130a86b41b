//! What the REST tests share: docchat behind its gateway comes from the shared test stack
//! (`docchat_test_stack::Stack::docchat`, one builder for every suite); here only the
//! assertions.

use std::time::Duration;

pub use docchat_test_stack::{ADMIN_KEY, Stack, read};
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
