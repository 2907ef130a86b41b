//! POST /api/v1/agents/mcp/inspect_tool at the gateway: its own answers (401 `Unauthorized`,
//! malformed JSON the only 400, a wrongly typed field a 200 with status error, the body cap
//! of mcp_max_body_size_mb a 413, mcp_rate_limit a 429). The inspection itself is tested in
//! agent-service (tests/it/mcp.rs).

use reqwest::Method;
use serde_json::json;

use crate::harness::{ADMIN_KEY, Stack, assert_error, read};

const PATH: &str = "/api/v1/agents/mcp/inspect_tool";

docchat_common::backend_tests! {
    async fn inspect_tool_answers_its_own_limits_and_malformed_json(backend) {
        let app = Stack::docchat_with(&backend, |c| {
            c.mcp_rate_limit = 6;
            c.mcp_max_body_size_mb = 1;
        })
        .await;

        let (s, b) = read(app.http(Method::POST, PATH, None).json(&json!({})).send().await.unwrap()).await;
        assert_error(s, &b, 401);
        assert_eq!(b["message"], "Unauthorized", "{}", backend.name);

        // 1: malformed JSON is a 400.
        let (s, b) = read(
            app.http(Method::POST, PATH, Some(ADMIN_KEY))
                .header("content-type", "application/json")
                .body("{\"tool_id\": ")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_error(s, &b, 400);

        // 2: a field of the wrong type is a semantic failure: 200, status error.
        let (s, b) = app.call(Method::POST, PATH, ADMIN_KEY, Some(json!({"tool_id": 5}))).await;
        assert_eq!(s, 200, "{}: {b}", backend.name);
        assert_eq!(b["status"], "error", "{b}");
        assert!(b["error"].as_str().is_some_and(|e| e.contains("tool_id")), "{b}");
        let (s, b) = app.call(Method::POST, PATH, ADMIN_KEY, Some(json!([1, 2]))).await;
        assert_eq!((s, &b["status"]), (200, &json!("error")), "{b}");

        // 3: a body above mcp_max_body_size_mb.
        let big = "A".repeat(1_200_000);
        let (s, b) = app
            .call(Method::POST, PATH, ADMIN_KEY, Some(json!({"file_name": "x.zip", "file_data_base64": big})))
            .await;
        assert_error(s, &b, 413);

        // 5 and 6 within the minute; the seventh is refused, for this user only.
        for _ in 0..2 {
            let (s, b) = app.call(Method::POST, PATH, ADMIN_KEY, Some(json!({"servers": 1}))).await;
            assert_eq!(s, 200, "{b}");
        }
        let (s, b) = app.call(Method::POST, PATH, ADMIN_KEY, Some(json!({"servers": 1}))).await;
        assert_error(s, &b, 429);
        let (_, bob) = app.user("bob").await;
        let (s, b) = app.call(Method::POST, PATH, &bob, Some(json!({"servers": 1}))).await;
        assert_ne!(s, 429, "{b}");
        app.stop().await;
    }
}
