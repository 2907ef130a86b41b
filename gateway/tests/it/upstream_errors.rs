//! A model upstream that fails: the caller hears the cause's status — 429 for the model's
//! rate limit, 504 for its timeout, 502 for a broken upstream — on the main API's
//! non-streamed completions and on the compatible API, not a blanket 503.

use std::sync::Arc;

use docchat_common::testing::{ScriptedHttp, SeenRequest};
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{app_with, session};
use crate::harness::assert_error;

/// An upstream answering each request with the status its last message names
/// (`status 429`), or a garbled body for `garbled`.
async fn failing_upstream() -> ScriptedHttp {
    ScriptedHttp::start(Arc::new(|r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        if last.contains("garbled") {
            return (200, "application/json".into(), b"{not json".to_vec());
        }
        let status = last
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(500);
        let error = json!({"error": {"message": "upstream says no", "type": "error"}});
        (
            status,
            "application/json".into(),
            error.to_string().into_bytes(),
        )
    }))
    .await
}

docchat_common::backend_tests! {
    async fn upstream_failures_keep_their_status(backend) {
        let model = failing_upstream().await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let chat = session(&app, &alice, None).await;
        for (question, want) in [
            ("status 429", 429),
            ("status 504", 504),
            ("status 500", 502),
            ("status 503", 503),
            ("garbled", 502),
        ] {
            let (status, body) = app
                .call(
                    Method::POST,
                    &format!("/api/v1/chats/{chat}/completions"),
                    &alice,
                    Some(json!({"message": question, "stream": false})),
                )
                .await;
            assert_error(status, &body, want);

            let (status, body) = app
                .call(
                    Method::POST,
                    "/compat_api/v1/chat/completions",
                    &alice,
                    Some(json!({"model": "scripted", "messages": [{"role": "user", "content": question}]})),
                )
                .await;
            assert_eq!(status, want, "compat {question}: {body}");
            assert!(body["error"]["message"].is_string(), "{body}");
        }
        app.stop().await;
    }
}
