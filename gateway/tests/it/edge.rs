//! What the gateway refuses before any service sees it: list offsets and limits storage
//! cannot hold, and bodies over the size limit.

use reqwest::Method;
use serde_json::json;

use crate::harness::{ADMIN_KEY, TestApp, assert_error};

docchat_common::backend_tests! {
    /// `offset`/`limit` of 2^63 and more, negative or not numbers: 400 with the error
    /// shape on every list endpoint (2^63 used to reach SQLite's binding and panic: a 500).
    async fn list_offsets_and_limits_are_bounded_at_the_edge(backend) {
        let app = TestApp::start(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (s, c) = app
            .call(Method::POST, "/api/v1/collections", &alice, Some(json!({"name": "c"})))
            .await;
        assert_eq!(s, 201, "{c}");
        let cid = c["id"].as_str().unwrap();
        let (s, chat) = app.call(Method::POST, "/api/v1/chats", &alice, Some(json!({}))).await;
        assert_eq!(s, 201, "{chat}");
        let sid = chat["id"].as_str().unwrap();
        let lists = [
            ("/api/v1/collections".to_owned(), &alice),
            ("/api/v1/documents".to_owned(), &alice),
            (format!("/api/v1/collections/{cid}/documents"), &alice),
            ("/api/v1/chats".to_owned(), &alice),
            (format!("/api/v1/chats/{sid}/messages"), &alice),
            ("/api/v1/extractors".to_owned(), &alice),
            ("/api/v1/users".to_owned(), &ADMIN_KEY.to_owned()),
            ("/api/v1/admin/api_keys".to_owned(), &ADMIN_KEY.to_owned()),
        ];
        for (path, key) in &lists {
            let (s, b) = app.call(Method::GET, &format!("{path}?offset=0&limit=5"), key, None).await;
            assert_eq!(s, 200, "{path}: {b}");
            for query in [
                "offset=9223372036854775808",
                "offset=18446744073709551615",
                "limit=9223372036854775808",
                "offset=1&limit=18446744073709551615",
                "offset=99999999999999999999999",
                "offset=-1",
                "limit=-5",
                "offset=ten",
            ] {
                let (s, b) = app.call(Method::GET, &format!("{path}?{query}"), key, None).await;
                assert_error(s, &b, 400);
                assert!(
                    !b["message"].as_str().unwrap().contains("internal"),
                    "{path}?{query}: {b}"
                );
            }
            // The largest value storage holds is still a page (an empty one).
            let (s, b) = app
                .call(Method::GET, &format!("{path}?offset=9223372036854775807"), key, None)
                .await;
            assert_eq!(s, 200, "{path}: {b}");
            assert_eq!(b, json!([]), "{path}");
        }
        app.stop().await;
    }
}
