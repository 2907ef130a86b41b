//! What the gateway refuses before any service sees it: list offsets and limits storage
//! cannot hold, and bodies over the size limit.

use docchat_common::config::Service;
use docchat_common::testing::Backend;
use reqwest::Method;
use serde_json::json;

use crate::harness::{ADMIN_KEY, Stack, assert_error, read};

docchat_common::backend_tests! {
    /// `offset`/`limit` of 2^63 and more, negative or not numbers: 400 with the error
    /// shape on every list endpoint (2^63 used to reach SQLite's binding and panic: a 500).
    async fn list_offsets_and_limits_are_bounded_at_the_edge(backend) {
        let app = Stack::docchat(&backend).await;
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
            ("/api/v1/agents/directory_stats".to_owned(), &alice),
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

/// A JSON body over the body limit is a 413 with the API's error shape, on the main API
/// (it was a 400) and on the compat API (in the vendor's shape), whether its length is
/// declared or only found while reading.
#[tokio::test]
async fn a_json_body_over_the_limit_is_413() {
    let app = Stack::docchat_with(&Backend::sqlite(), |c| c.max_body_bytes = 1_000_000).await;
    let (_, alice) = app.user("alice").await;
    let description = "x".repeat(1_200_000);
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/collections",
            &alice,
            Some(json!({"name": "big", "description": description})),
        )
        .await;
    assert_error(s, &b, 413);
    // No Content-Length: the limit holds while the body streams in.
    let body = serde_json::to_vec(&json!({"name": "big", "description": description})).unwrap();
    let chunks = futures::stream::iter(
        body.chunks(64 * 1024)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let response = app
        .http(Method::POST, "/api/v1/collections", Some(&alice))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    let (s, b) = read(response).await;
    assert_error(s, &b, 413);
    let (s, b) = app
        .call(
            Method::POST,
            "/compat_api/v1/chat/completions",
            &alice,
            Some(json!({"model": "auto", "messages": [{"role": "user", "content": description}]})),
        )
        .await;
    assert_eq!(s, 413, "{b}");
    assert_eq!(b["error"]["type"], "invalid_request_error", "{b}");
    assert_eq!(b["error"]["code"], "payload_too_large", "{b}");
    // Under the limit is still fine.
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/collections",
            &alice,
            Some(json!({"name": "small", "description": "x".repeat(90_000)})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    app.stop().await;
}

/// A JSON body between gRPC's default 4 MiB and the body limit reaches its service and
/// comes back whole (it used to be refused with tonic's "decoded message length too large"):
/// a memory block of 6 MiB, once the operator's ceiling on memory block content allows it
/// (issue 37: every stored field has a ceiling; this one is a runtime setting).
#[tokio::test]
async fn json_bodies_over_four_mebibytes_reach_the_services() {
    let app = Stack::docchat(&Backend::sqlite()).await;
    let (_, erin) = app.user("erin").await;
    crate::harness::set_global(&app, "config_cache_ttl_seconds", "0").await;
    crate::harness::set_global(
        &app,
        "memory_block_max_content_bytes",
        &(8 << 20).to_string(),
    )
    .await;
    let content = "d".repeat(6 * 1024 * 1024);
    let (s, e) = app
        .call(
            Method::POST,
            "/api/v1/memory_blocks",
            &erin,
            Some(json!({"name": "big", "content": content, "max_content_length": 0})),
        )
        .await;
    assert_eq!(
        s,
        201,
        "{}",
        e.to_string().chars().take(300).collect::<String>()
    );
    let id = e["id"].as_str().unwrap();
    let (s, got) = app
        .call(
            Method::GET,
            &format!("/api/v1/memory_blocks/{id}"),
            &erin,
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(got["content"].as_str().unwrap().len(), content.len());
    app.stop().await;
}

/// The body limit is on the whole upload body, also when its length is not declared
/// (chunked): one byte over it is a 413 even though the file part alone is under it, and a
/// body of exactly the limit is stored (tests/compose/hostile.py sends 140 MB + 1 this way).
#[tokio::test]
async fn an_upload_body_one_byte_over_the_limit_is_413_when_streamed() {
    const MAX: usize = 1_000_000;
    let app = Stack::docchat_with(&Backend::sqlite(), |c| c.max_body_bytes = MAX).await;
    let (_, alice) = app.user("alice").await;
    let head =
        b"--edge\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.txt\"\r\n\r\n";
    let tail = b"\r\n--edge--\r\n";
    let send = |total: usize| {
        let mut body = head.to_vec();
        body.resize(total - tail.len(), b'x');
        body.extend_from_slice(tail);
        let chunks = futures::stream::iter(
            body.chunks(64 * 1024)
                .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
                .collect::<Vec<_>>(),
        );
        app.http(Method::PUT, "/api/v1/uploads", Some(&alice))
            .header("content-type", "multipart/form-data; boundary=edge")
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
    };
    let (s, b) = read(send(MAX + 1).await.unwrap()).await;
    assert_error(s, &b, 413);
    // A refused upload leaves nothing behind: no row, no blob.
    let stored = || async {
        let rows = app.count_rows(Service::Ingest, "uploads").await;
        let blobs = std::fs::read_dir(app.data_dir().join("blobs"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().is_file())
                    .count()
            })
            .unwrap_or(0);
        (rows, blobs)
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(stored().await, (0, 0), "the refused upload was kept");
    let (s, b) = read(send(MAX).await.unwrap()).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["filename"], "f.txt");
    assert_eq!(stored().await, (1, 1));
    app.stop().await;
}

docchat_common::backend_tests! {
    /// Text with NUL (U+0000) is a 400 on both backends, refused before anything changes:
    /// PostgreSQL cannot store it (schemathesis's PATCH of a collection name was a 500 there,
    /// and stored on SQLite). In JSON bodies (any piece size), URLs and the compat API.
    async fn text_with_nul_is_refused_at_the_edge(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (s, c) = app
            .call(Method::POST, "/api/v1/collections", &alice, Some(json!({"name": "kept"})))
            .await;
        assert_eq!(s, 201, "{c}");
        let cid = c["id"].as_str().unwrap();
        let refused = "text may not contain the NUL character (\\u0000)";
        for (method, path, body) in [
            (Method::PATCH, format!("/api/v1/collections/{cid}"), json!({"name": "a\u{0}b"})),
            (Method::POST, "/api/v1/collections".to_owned(), json!({"name": "n", "description": "\u{0}"})),
            (Method::POST, "/api/v1/memory_blocks".to_owned(), json!({"name": "m", "content": "x\u{0}"})),
        ] {
            let (s, b) = app.call(method.clone(), &path, &alice, Some(body)).await;
            assert_error(s, &b, 400);
            assert_eq!(b["message"], refused, "{method} {path}");
        }
        // Streamed one byte at a time, the escape split across pieces.
        let body = br#"{"name": "split\u0000"}"#.to_vec();
        let chunks = futures::stream::iter(body.into_iter().map(|b| Ok::<_, std::io::Error>(vec![b])));
        let response = app
            .http(Method::PATCH, &format!("/api/v1/collections/{cid}"), Some(&alice))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await
            .unwrap();
        let (s, b) = read(response).await;
        assert_error(s, &b, 400);
        for path in [format!("/api/v1/collections/{cid}%00"), "/api/v1/collections?name_filter=a%00".to_owned()] {
            let (s, b) = app.call(Method::GET, &path, &alice, None).await;
            assert_error(s, &b, 400);
            assert_eq!(b["message"], refused, "{path}");
        }
        let (s, b) = app
            .call(
                Method::POST,
                "/compat_api/v1/chat/completions",
                &alice,
                Some(json!({"model": "auto", "messages": [{"role": "user", "content": "hi\u{0}"}]})),
            )
            .await;
        assert_eq!(s, 400, "{b}");
        // Nothing changed; an escaped backslash before u0000 is ordinary text.
        let (s, b) = app.call(Method::GET, &format!("/api/v1/collections/{cid}"), &alice, None).await;
        assert_eq!((s, b["name"].as_str()), (200, Some("kept")), "{b}");
        let (s, b) = app
            .call(Method::PATCH, &format!("/api/v1/collections/{cid}"), &alice, Some(json!({"name": "a\\u0000b"})))
            .await;
        assert_eq!((s, b["name"].as_str()), (200, Some("a\\u0000b")), "{b}");
        app.stop().await;
    }
}
