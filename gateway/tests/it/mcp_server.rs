//! docchat as an MCP server (`/mcp`), through rmcp's Streamable HTTP client: a user's key
//! lists that user's collections only, searches them (chunks with pages), asks with
//! progress and references, reads documents by page (tool and resource, with the
//! continuation of a long page); another user's ids are "not found" alike; a bad key, a
//! malformed message, an unknown tool or bad arguments get errors, never a 5xx.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use docchat_agent_service::mcp::http::Http;
use reqwest::Method;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, JsonObject, NumberOrString, ProgressNotificationParam,
    ProgressToken, ReadResourceRequestParams, RequestMetaObject, ResourceContents,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::completions::{ANSWER, app_with, upstream};
use crate::harness::{Stack, collection, ingest, wait_documents};

/// Counts the progress notifications it receives.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

async fn connect(app: &Stack, key: &str) -> (RunningService<RoleClient, Client>, Client) {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base()))
        .auth_header(key.to_owned());
    let transport =
        StreamableHttpClientTransport::with_client(Http(reqwest::Client::new()), config);
    let client = Client::default();
    let running = client
        .clone()
        .serve(transport)
        .await
        .expect("MCP initialize");
    (running, client)
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object: {other}"),
    }
}

/// A tool's structured answer (the text content carries the same JSON).
fn structured(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let value = result
        .structured_content
        .clone()
        .expect("structured content");
    let text = result.content[0]
        .as_text()
        .expect("text content")
        .text
        .clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    value
}

/// A tool's failure message.
fn failure(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    result.content[0]
        .as_text()
        .expect("text content")
        .text
        .clone()
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    tool: &'static str,
    a: Value,
) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(a)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A document of three pages (form feeds) whose second page holds the fact searched for,
/// and a fourth page longer than one get_document slice.
fn pages() -> (Vec<String>, Vec<u8>) {
    let long: String = (0..1500)
        .map(|i| format!("Line {i} of the appendix. "))
        .collect();
    let pages = vec![
        "Paris is the capital of France. The Seine flows through Paris.".to_owned(),
        "The lighthouse keeper Ansel counted 417 gulls on the northern rocks.".to_owned(),
        "Annual rainfall at the station was recorded in millimetres.".to_owned(),
        long.trim().to_owned(),
    ];
    let text = pages.join("\n\x0c\n");
    (pages, text.into_bytes())
}

docchat_common::backend_tests! {
    async fn an_mcp_client_searches_asks_and_reads_what_its_key_may_see(backend) {
        let model = upstream(Duration::from_millis(40)).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;
        let (texts, bytes) = pages();
        ingest(&app, &alice, &cid, "gulls.txt", bytes).await;
        wait_documents(&app, &alice, &cid, 1).await;

        let (mcp, handler) = connect(&app, &alice).await;
        let info = mcp.peer_info().expect("server info");
        // Under 2026-07-28 the client learns the server through `server/discover`.
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("docchat"), "{info:?}");
        let tools = mcp.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(names, ["ask", "get_document", "list_collections", "list_documents", "search"]);
        for t in &tools {
            let hints = t.annotations.clone().expect("annotations");
            assert_eq!(hints.read_only_hint, Some(t.name != "ask"), "{}", t.name);
            assert_eq!(hints.destructive_hint, Some(false), "{}", t.name);
            assert!(t.description.as_ref().is_some_and(|d| d.len() > 40), "{}", t.name);
        }

        let listed = structured(&call(&mcp, "list_collections", json!({})).await);
        let ids: Vec<&str> = listed["collections"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(ids, [cid.as_str()], "{listed}");
        assert_eq!(listed["collections"][0]["document_count"], 1);

        let found = structured(&call(&mcp, "search", json!({"query": "How many gulls did the lighthouse keeper count?", "collection_id": cid, "top_k": 3})).await);
        let first = &found["results"][0];
        assert_eq!(first["document_name"], "gulls.txt", "{found}");
        assert_eq!(first["collection_id"], cid.as_str());
        assert_eq!(first["pages"], json!([2]), "{found}");
        assert!(first["text"].as_str().unwrap().contains("417 gulls"), "{found}");
        let document = first["document_id"].as_str().unwrap().to_owned();
        // Without a collection: across all of the caller's.
        let anywhere = structured(&call(&mcp, "search", json!({"query": "lighthouse gulls"})).await);
        assert_eq!(anywhere["results"][0]["document_id"], document.as_str());

        let listed = structured(&call(&mcp, "list_documents", json!({"collection_id": cid})).await);
        assert_eq!(listed["documents"][0]["id"], document.as_str(), "{listed}");
        assert_eq!(listed["documents"][0]["page_count"], 4);

        let page = structured(&call(&mcp, "get_document", json!({"document_id": document, "pages": [2]})).await);
        assert_eq!(page["pages"], json!([{"page": 2, "text": texts[1]}]), "{page}");
        assert_eq!(page["next_cursor"], Value::Null);
        // The whole document, through its continuation: every page exactly.
        let mut read: Vec<(u64, String)> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut calls = 0;
        loop {
            let mut a = json!({"document_id": document});
            if let Some(c) = &cursor {
                a["cursor"] = json!(c);
            }
            let slice = structured(&call(&mcp, "get_document", a).await);
            calls += 1;
            for p in slice["pages"].as_array().unwrap() {
                let n = p["page"].as_u64().unwrap();
                match read.last_mut() {
                    Some((last, text)) if *last == n => text.push_str(p["text"].as_str().unwrap()),
                    _ => read.push((n, p["text"].as_str().unwrap().to_owned())),
                }
            }
            match slice["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        assert!(calls >= 2, "the long page needs a continuation");
        let want: Vec<(u64, String)> = texts.iter().enumerate().map(|(i, t)| (i as u64 + 1, t.clone())).collect();
        assert_eq!(read, want);

        // Documents are resources.
        let resources = mcp.list_all_resources().await.unwrap();
        let uri = format!("docchat://documents/{document}");
        assert_eq!(resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(), [uri.as_str()]);
        let contents = mcp.read_resource(ReadResourceRequestParams::new(uri.clone())).await.unwrap().contents;
        let by_page: Vec<(String, String)> = contents
            .into_iter()
            .map(|c| match c {
                ResourceContents::TextResourceContents { uri, text, .. } => (uri, text),
                other => panic!("{other:?}"),
            })
            .collect();
        let want: Vec<(String, String)> = texts.iter().enumerate().map(|(i, t)| (format!("{uri}#page={}", i + 1), t.clone())).collect();
        assert_eq!(by_page, want);

        // ask: the answer with its references, progress while it generates.
        let mut params = CallToolRequestParams::new("ask").with_arguments(args(json!({"question": "What is the capital of France?", "collection_id": cid})));
        let mut meta = RequestMetaObject::default();
        meta.set_progress_token(ProgressToken(NumberOrString::Number(7)));
        params.meta = Some(meta);
        let asked = structured(&mcp.call_tool(params).await.unwrap());
        assert_eq!(asked["answer"], ANSWER, "{asked}");
        assert_eq!(asked["references"][0]["document_id"], document.as_str(), "{asked}");
        assert!(asked["references"][0]["pages"].as_array().is_some_and(|p| !p.is_empty()), "{asked}");
        assert!(handler.progress.load(Ordering::SeqCst) >= 2, "progress notifications while generating");
        // It is a chat of alice's, like one asked through REST.
        let (s, chats) = app.call(Method::GET, "/api/v1/chats", &alice, None).await;
        assert_eq!(s, 200);
        assert!(chats.as_array().unwrap().iter().any(|c| c["id"] == asked["chat_session_id"]), "{chats}");

        // Mistakes in a call are JSON-RPC errors.
        let unknown = mcp.call_tool(CallToolRequestParams::new("drop_tables").with_arguments(args(json!({})))).await;
        assert!(unknown.is_err(), "{unknown:?}");
        let bad = mcp.call_tool(CallToolRequestParams::new("search").with_arguments(args(json!({"top_k": "many"})))).await;
        assert!(bad.is_err(), "{bad:?}");
        mcp.cancel().await.unwrap();

        // Bob sees nothing of alice's, and cannot tell her ids from made-up ones.
        let (other, _) = connect(&app, &bob).await;
        let listed = structured(&call(&other, "list_collections", json!({})).await);
        assert_eq!(listed["collections"], json!([]));
        let empty = structured(&call(&other, "search", json!({"query": "gulls"})).await);
        assert_eq!(empty["results"], json!([]));
        let made_up = "0123456789abcdef0123456789abcdef";
        for (tool, key, real) in [
            ("search", "collection_id", cid.as_str()),
            ("list_documents", "collection_id", cid.as_str()),
            ("get_document", "document_id", document.as_str()),
        ] {
            let mut a = json!({"query": "gulls"});
            if tool != "search" {
                a = json!({});
            }
            a[key] = json!(real);
            let theirs = failure(&call(&other, tool, a.clone()).await);
            a[key] = json!(made_up);
            let none = failure(&call(&other, tool, a).await);
            assert_eq!(theirs.replace(real, "ID"), none.replace(made_up, "ID"), "{tool}");
            assert!(!theirs.contains("gulls.txt"), "{theirs}");
        }
        assert!(other.read_resource(ReadResourceRequestParams::new(uri)).await.is_err());
        other.cancel().await.unwrap();

        // Over plain HTTP: the key first, then MCP's own refusals, never a 5xx.
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        for key in [None, Some("sk-not-a-key")] {
            let r = app.http(Method::POST, "/mcp", key).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
            assert_eq!(r.status(), 401);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["code"], 401, "{body}");
        }
        for body in ["{\"jsonrpc\":\"2.0\",\"id\":1", "{\"foo\":1}", "[]", "null"] {
            let r = app.http(Method::POST, "/mcp", Some(&alice)).header("accept", "application/json, text/event-stream").header("content-type", "application/json").body(body).send().await.unwrap();
            let status = r.status().as_u16();
            let text = r.text().await.unwrap();
            assert!((400..500).contains(&status), "{body}: {status} {text}");
            assert!(serde_json::from_str::<Value>(&text).is_ok(), "{body}: a JSON answer, got {text}");
        }
        let r = app.http(Method::POST, "/mcp", Some(&alice)).header("content-type", "application/json").json(&init).send().await.unwrap();
        assert_eq!(r.status(), 406, "Accept must name both");
        let r = app.http(Method::GET, "/mcp", Some(&alice)).header("accept", "text/event-stream").send().await.unwrap();
        assert_eq!(r.status(), 405, "no sessions to stream");
        let r = app.http(Method::POST, "/mcp", Some(&alice)).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
        assert_eq!(r.status(), 200, "still answering");
        assert!(r.headers().get("mcp-session-id").is_none(), "stateless: any replica answers");
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn write_tools_are_offered_only_when_enabled_and_count_against_the_mcp_limits(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = Stack::builder(&backend)
            .everything()
            .scripted_model(&model.base_url)
            .configure(|c| {
                c.mcp_write_tools = true;
                c.mcp_rate_limit = 2;
            })
            .start()
            .await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;
        let (mcp, _) = connect(&app, &alice).await;
        let tools = mcp.list_all_tools().await.unwrap();
        let upload = tools.iter().find(|t| t.name == "upload_text").expect("upload_text offered");
        let hints = upload.annotations.clone().unwrap();
        assert_eq!((hints.read_only_hint, hints.destructive_hint), (Some(false), Some(true)));

        let added = structured(&call(&mcp, "upload_text", json!({"collection_id": cid, "name": "orchard", "text": "The orchard on Mill Road grows 23 kinds of pear."})).await);
        assert_eq!(added["status"], "completed", "{added}");
        let document = added["document_id"].as_str().unwrap().to_owned();
        let found = structured(&call(&mcp, "search", json!({"query": "kinds of pear on Mill Road", "collection_id": cid})).await);
        assert_eq!(found["results"][0]["document_id"], document.as_str(), "{found}");
        assert_eq!(found["results"][0]["document_name"], "orchard.txt");

        // Not into another user's collection.
        let (other, _) = connect(&app, &bob).await;
        let refused = failure(&call(&other, "upload_text", json!({"collection_id": cid, "name": "x.md", "text": "x"})).await);
        assert!(refused.contains("not found"), "{refused}");
        other.cancel().await.unwrap();
        // Two a minute for alice (the deployment's mcp_rate_limit): the second passes, the
        // third is refused, naming the limit.
        structured(&call(&mcp, "upload_text", json!({"collection_id": cid, "name": "b.md", "text": "# B\n\nSecond."})).await);
        let limited = failure(&call(&mcp, "upload_text", json!({"collection_id": cid, "name": "c.md", "text": "Third."})).await);
        assert!(limited.contains("at most 2 per minute"), "{limited}");
        let (s, docs) = app.call(Method::GET, &format!("/api/v1/collections/{cid}/documents"), &alice, None).await;
        assert_eq!(s, 200);
        assert_eq!(docs.as_array().unwrap().len(), 2, "{docs}");
        mcp.cancel().await.unwrap();
        app.stop().await;
    }
}
