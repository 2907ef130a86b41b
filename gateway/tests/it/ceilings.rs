//! Ceilings on stored fields and on list pages (issue 37): a JSON settings field over 256 KiB
//! and a memory block over the operator's ceiling (also with max_content_length 0,
//! "unlimited") are refused with SPEC.md's body and store nothing; a list over large rows,
//! also rows stored before the ceilings, answers pages within the byte budget that a client
//! pages through with offset and limit.

use std::collections::HashSet;

use docchat_common::config::Service;
use docchat_common::limits::{JSON_BYTES, LIST_PAGE_BYTES, MEMORY_BLOCK_CONTENT_BYTES, TEXT_BYTES};
use docchat_proto::chat::v1 as chat;
use docchat_proto::chat::v1::memory_block_service_client::MemoryBlockServiceClient;
use reqwest::Method;
use sea_orm::ConnectionTrait;
use sea_orm::sea_query::{Alias, Expr, Query};
use serde_json::{Value, json};

use crate::harness::{ADMIN_KEY, Stack, assert_error, set_global};

/// The user behind a REST key, as agent-service acts for it.
fn acting(user_id: &str, username: &str) -> docchat_common::Caller {
    docchat_common::Caller {
        user_id: user_id.to_owned(),
        ..docchat_common::testing::user(username, false)
    }
}

/// A JSON object whose text is about `bytes` long.
fn big_object(bytes: usize) -> Value {
    json!({"exception_message": "x".repeat(bytes)})
}

/// GET `path`: the status, the `x-next-offset` header, the body's length and the body.
async fn get_page(app: &Stack, key: &str, path: &str) -> (u16, Option<u64>, usize, Value) {
    let r = app.http(Method::GET, path, Some(key)).send().await.unwrap();
    let status = r.status().as_u16();
    let next = r
        .headers()
        .get("x-next-offset")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let bytes = r.bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, next, bytes.len(), body)
}

/// Every row of a list, paged with offset and limit as a client does (the next offset is
/// the rows received so far); each page must stay within the budget. The ids, in order, and
/// how many pages it took.
async fn page_through(
    app: &Stack,
    key: &str,
    path: &str,
    items: fn(&Value) -> &Vec<Value>,
) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut pages = 0;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let (s, next, len, body) = get_page(
            app,
            key,
            &format!("{path}{sep}offset={}&limit=100", ids.len()),
        )
        .await;
        assert_eq!(s, 200, "{path}: {body}");
        // The stored bytes are within the budget; the JSON adds names and framing per row.
        assert!(
            len as u64 <= LIST_PAGE_BYTES + 64 * 1024,
            "{path}: a page of {len} bytes"
        );
        let rows = items(&body);
        pages += 1;
        if rows.is_empty() {
            assert_eq!(next, None);
            return (ids, pages);
        }
        ids.extend(rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()));
        if let Some(next) = next {
            assert_eq!(
                next,
                ids.len() as u64,
                "x-next-offset is the next page's offset"
            );
        }
    }
}

docchat_common::backend_tests! {
    /// guardrails_settings and schema over 256 KiB, a prompt over its ceiling: 413 with the
    /// error body, on create and on PATCH, and nothing is stored or changed.
    async fn extractor_settings_over_their_ceiling_are_refused(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, key) = app.user("erin").await;
        let over = big_object(300 * 1024);
        let (s, b) = app
            .call(Method::POST, "/api/v1/extractors", &key,
                Some(json!({"name": "big", "llm": "auto", "guardrails_settings": over})))
            .await;
        assert_error(s, &b, 413);
        assert!(b["message"].as_str().unwrap().contains("guardrails_settings"), "{b}");
        let schema = json!({"type": "object", "description": "x".repeat(JSON_BYTES)}).to_string();
        let (s, b) = app
            .call(Method::POST, "/api/v1/extractors", &key,
                Some(json!({"name": "big", "llm": "auto", "schema": schema})))
            .await;
        assert_error(s, &b, 413);
        let (s, b) = app
            .call(Method::POST, "/api/v1/extractors", &key,
                Some(json!({"name": "big", "llm": "auto", "prompt": "p".repeat(TEXT_BYTES + 1)})))
            .await;
        assert_error(s, &b, 413);
        let (s, list) = app.call(Method::GET, "/api/v1/extractors", &key, None).await;
        assert_eq!((s, list), (200, json!([])), "{}: nothing stored", backend.name);
        assert_eq!(app.count_rows(Service::Ingest, "extractors").await, 0);

        // Just under the ceiling is fine; a PATCH over it changes nothing (administrators
        // hold EditExtractors).
        let under = big_object(200 * 1024);
        let (s, e) = app
            .call(Method::POST, "/api/v1/extractors", ADMIN_KEY,
                Some(json!({"name": "ok", "llm": "auto", "guardrails_settings": under})))
            .await;
        assert_eq!(s, 200, "{e}");
        assert_eq!(e["guardrails_settings"], under);
        let path = format!("/api/v1/extractors/{}", e["id"].as_str().unwrap());
        let (s, b) = app
            .call(Method::PATCH, &path, ADMIN_KEY, Some(json!({"guardrails_settings": over})))
            .await;
        assert_error(s, &b, 413);
        let (s, b) = app
            .call(Method::PATCH, &path, ADMIN_KEY, Some(json!({"name": "n".repeat(256)})))
            .await;
        assert_error(s, &b, 400);
        let (s, now) = app.call(Method::GET, &path, ADMIN_KEY, None).await;
        assert_eq!(s, 200);
        assert_eq!(now, e, "refused updates changed nothing");
        app.stop().await;
    }

    /// A block's content is capped by the operator's ceiling (1 MiB by default, the runtime
    /// setting memory_block_max_content_bytes), also with max_content_length 0 and with a
    /// max_content_length above the ceiling; on create, update and append (gRPC).
    async fn memory_block_content_has_an_operator_ceiling(backend) {
        let app = Stack::docchat(&backend).await;
        // Settings reach chat-service at once (no cache), so the ceiling's change below does.
        set_global(&app, "config_cache_ttl_seconds", "0").await;
        let (alice_id, alice) = app.user("alice").await;
        let ceiling = usize::try_from(MEMORY_BLOCK_CONTENT_BYTES).unwrap();
        let two_mb = "x".repeat(2 * 1024 * 1024);
        for max in [json!(0), json!(5_000_000)] {
            let (s, b) = app
                .call(Method::POST, "/api/v1/memory_blocks", &alice,
                    Some(json!({"name": "huge", "content": two_mb, "max_content_length": max})))
                .await;
            assert_error(s, &b, 413);
        }
        let (s, list) = app.call(Method::GET, "/api/v1/memory_blocks", &alice, None).await;
        assert_eq!((s, &list["total"]), (200, &json!(0)), "{}: nothing stored", backend.name);

        // Up to the ceiling is fine with 0 ("unlimited"); an update over it is refused.
        let (s, b) = app
            .call(Method::POST, "/api/v1/memory_blocks", &alice,
                Some(json!({"name": "full", "content": "y".repeat(ceiling), "max_content_length": 0})))
            .await;
        assert_eq!(s, 201, "{b}");
        let id = b["id"].as_str().unwrap().to_owned();
        let path = format!("/api/v1/memory_blocks/{id}");
        let (s, b) = app
            .call(Method::PUT, &path, &alice, Some(json!({"content": two_mb})))
            .await;
        assert_error(s, &b, 413);
        let (s, b) = app
            .call(Method::PUT, &path, &alice, Some(json!({"system_prompt_amendment": "a".repeat(TEXT_BYTES + 1)})))
            .await;
        assert_error(s, &b, 413);

        // An append (the agent's memory tool) past the ceiling: 413, the content unchanged.
        let me = acting(&alice_id, "alice");
        let mut blocks = MemoryBlockServiceClient::new(app.chat().channel());
        let err = blocks
            .update_memory_block(app.req(Service::Chat, &me, chat::UpdateMemoryBlockRequest {
                id: id.clone(),
                fields: Some(chat::MemoryBlockFields { content: Some("z".into()), ..Default::default() }),
                append: true,
            }))
            .await
            .unwrap_err();
        assert_eq!(docchat_common::ApiError::from_status(&err).code.http_status(), 413, "{err:?}");
        let (_, b) = app.call(Method::GET, &path, &alice, None).await;
        assert_eq!(b["content"].as_str().unwrap().len(), ceiling);

        // The operator lowers the ceiling: 1 KB to 64 MB; it caps every block at once.
        for bad in ["1023", "67108865", "lots"] {
            let (s, b) = app
                .call(Method::PUT, "/api/v1/configurations/memory_block_max_content_bytes", ADMIN_KEY,
                    Some(json!({"string_value": bad})))
                .await;
            assert_error(s, &b, 400);
        }
        set_global(&app, "memory_block_max_content_bytes", "2048").await;
        let (s, b) = app
            .call(Method::POST, "/api/v1/memory_blocks", &alice,
                Some(json!({"name": "small", "content": "s".repeat(3000), "max_content_length": 10000})))
            .await;
        assert_error(s, &b, 413);
        let (s, b) = app
            .call(Method::POST, "/api/v1/memory_blocks", &alice,
                Some(json!({"name": "small", "content": "s".repeat(2000)})))
            .await;
        assert_eq!(s, 201, "{b}");
        // A block stored before the ceiling was lowered can still be renamed.
        let (s, b) = app
            .call(Method::PUT, &path, &alice, Some(json!({"name": "renamed"})))
            .await;
        assert_eq!(s, 204, "{b}");
        app.stop().await;
    }

    /// Memory blocks of about 1 MB each: a page holds what fits the budget, says where the
    /// next one starts, and paging with offset reaches every block once.
    async fn memory_block_lists_page_by_size(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let content = "m".repeat(1_000_000);
        for i in 0..10 {
            let (s, b) = app
                .call(Method::POST, "/api/v1/memory_blocks", &alice,
                    Some(json!({"name": format!("block {i}"), "content": content, "max_content_length": 0})))
                .await;
            assert_eq!(s, 201, "{b}");
        }
        let (s, next, len, first) = get_page(&app, &alice, "/api/v1/memory_blocks").await;
        assert_eq!(s, 200);
        let n = first["items"].as_array().unwrap().len();
        assert!((1..10).contains(&n), "{}: {n} blocks in {len} bytes", backend.name);
        assert_eq!(first["total"], json!(10));
        assert_eq!(next, Some(n as u64));
        let (ids, pages) = page_through(&app, &alice, "/api/v1/memory_blocks", |b| b["items"].as_array().unwrap()).await;
        assert_eq!(ids.len(), 10, "{ids:?}");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10, "each block once");
        assert!(pages > 2, "{pages} pages");
        app.stop().await;
    }

    /// Extractors stored before the ceilings with 3 MB guardrails_settings each: the list
    /// answers pages within the budget instead of one answer over the message limit.
    async fn extractor_lists_page_by_size_over_old_rows(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, key) = app.user("erin").await;
        let db = app.database(Service::Ingest).await;
        for i in 0..5 {
            let (s, e) = app
                .call(Method::POST, "/api/v1/extractors", &key,
                    Some(json!({"name": format!("old {i}"), "llm": "auto"})))
                .await;
            assert_eq!(s, 200, "{e}");
            // As an older release stored it: the same definition with huge guardrails.
            let mut spec = e.clone();
            spec["guardrails_settings"] = big_object(3 * 1024 * 1024);
            let update = Query::update()
                .table(Alias::new("extractors"))
                .value(Alias::new("spec"), spec.to_string())
                .and_where(Expr::col(Alias::new("id")).eq(e["id"].as_str().unwrap()))
                .to_owned();
            db.execute(db.get_database_backend().build(&update)).await.unwrap();
        }
        let (s, next, len, first) = get_page(&app, &key, "/api/v1/extractors").await;
        assert_eq!(s, 200, "{first}");
        let n = first.as_array().unwrap().len();
        assert!((1..5).contains(&n), "{}: {n} extractors in {len} bytes", backend.name);
        assert_eq!(next, Some(n as u64));
        assert_eq!(first[0]["guardrails_settings"]["exception_message"].as_str().unwrap().len(), 3 * 1024 * 1024);
        let (ids, _) = page_through(&app, &key, "/api/v1/extractors", |b| b.as_array().unwrap()).await;
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 5, "{ids:?}");
        db.close().await.unwrap();
        app.stop().await;
    }

    /// A session of long messages (3 MB each, as long questions stored earlier could be):
    /// its message list answers pages within the budget, in order, each message once.
    async fn message_lists_page_by_size(backend) {
        let app = Stack::docchat(&backend).await;
        let (user_id, key) = app.user("maud").await;
        let (s, session) = app.call(Method::POST, "/api/v1/chats", &key, Some(json!({}))).await;
        assert!(s == 200 || s == 201, "{session}");
        let session = session["id"].as_str().unwrap().to_owned();
        let db = app.database(Service::Chat).await;
        let start = chrono::Utc::now();
        let mut inserted = Vec::new();
        for i in 0..5i64 {
            let id = uuid::Uuid::now_v7().to_string();
            let insert = Query::insert()
                .into_table(Alias::new("messages"))
                .columns(["id", "session_id", "owner_id", "username", "content", "votes", "has_references", "total_references", "created_at"].map(Alias::new))
                .values_panic([
                    id.clone().into(),
                    session.clone().into(),
                    user_id.clone().into(),
                    "maud".into(),
                    format!("{i} {}", "q".repeat(3_000_000)).into(),
                    0i32.into(),
                    false.into(),
                    0i64.into(),
                    (start + chrono::Duration::seconds(i)).into(),
                ])
                .to_owned();
            db.execute(db.get_database_backend().build(&insert)).await.unwrap();
            inserted.push(id);
        }
        let path = format!("/api/v1/chats/{session}/messages");
        let (s, next, len, first) = get_page(&app, &key, &path).await;
        assert_eq!(s, 200, "{}", backend.name);
        let n = first.as_array().unwrap().len();
        assert!((1..5).contains(&n), "{}: {n} messages in {len} bytes", backend.name);
        assert_eq!(next, Some(n as u64), "{}", backend.name);
        let (ids, _) = page_through(&app, &key, &path, |b| b.as_array().unwrap()).await;
        assert_eq!(ids, inserted, "{}: every message once, in order", backend.name);
        db.close().await.unwrap();
        app.stop().await;
    }
}
