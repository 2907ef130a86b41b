//! Custom tools through REST (SPEC.md "Custom tools"): every error row of its table with
//! the exact body, the permission rule, owner-only access, refused archives leaving
//! nothing, the round trip, remote_mcp's one tool per server, a general_code function the
//! agent calls in the sandbox, and the generated system prompt with its 408.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn, SeenRequest, Streamed};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::agent::{agent_upstream, app_with_agent};
use crate::completions::{session, stream};
use crate::harness::{Stack, read};

const TOOLS: &str = "/api/v1/agents/custom_tools";

/// Gives user `uid` the permission (through a role of its own).
async fn grant(app: &Stack, uid: &str, permission: &str) {
    crate::custom_agents::grant(app, uid, &format!("r-{uid}-{permission}"), &[permission]).await;
}

/// A user holding ConfigureAgents.
async fn configurer(app: &Stack, name: &str) -> String {
    let (uid, key) = app.user(name).await;
    grant(app, &uid, "ConfigureAgents").await;
    key
}

pub(crate) fn form(
    tool_type: Option<&str>,
    tool_args: Option<&str>,
    file: Option<(&str, Vec<u8>)>,
) -> Form {
    let mut f = Form::new();
    if let Some(t) = tool_type {
        f = f.text("tool_type", t.to_owned());
    }
    if let Some(a) = tool_args {
        f = f.text("tool_args", a.to_owned());
    }
    if let Some((name, data)) = file {
        f = f.part("file", Part::bytes(data).file_name(name.to_owned()));
    }
    f
}

pub(crate) async fn post(app: &Stack, key: Option<&str>, form: Form) -> (u16, Value) {
    read(
        app.http(Method::POST, TOOLS, key)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn assert_body(status: u16, body: &Value, want: u16, message: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body, &json!({"code": want, "message": message}));
}

const ADD: &str = r#"import json

def helper(x):
    return x

def add_numbers(a: int, b: int = 2) -> dict:
    """Adds two numbers.

    Args:
        a: the first number
        b: the second number
    """
    print("adding")
    if a < 0:
        raise ValueError("a must not be negative")
    return {"sum": a + b}
"#;

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn symlink_zip() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.add_symlink(
        "link",
        "/etc/passwd",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    w.finish().unwrap().into_inner()
}

fn bomb_zip() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    w.start_file("zeros.py", opts).unwrap();
    let block = vec![0u8; 1 << 20];
    for _ in 0..300 {
        w.write_all(&block).unwrap();
    }
    w.finish().unwrap().into_inner()
}

async fn tool_list(app: &Stack, key: &str) -> Vec<Value> {
    let (s, list) = app.call(Method::GET, TOOLS, key, None).await;
    assert_eq!(s, 200, "{list}");
    list.as_array().unwrap().clone()
}

async fn plain_app(backend: &docchat_common::testing::Backend) -> Stack {
    Stack::builder(backend).agent().gateway().start().await
}

docchat_common::backend_tests! {
    async fn custom_tool_errors_answer_spec_messages_exactly(backend) {
        let app = plain_app(&backend).await;
        let (uid, key) = app.user("alice").await;
        let py = || Some(("add_numbers.py", ADD.as_bytes().to_vec()));

        // No key, a bad key, no ConfigureAgents: 401 Unauthorized.
        let (s, b) = post(&app, None, form(Some("general_code"), Some("{}"), py())).await;
        assert_body(s, &b, 401, "Unauthorized");
        let (s, b) = post(&app, Some("sk-nope"), form(Some("general_code"), Some("{}"), py())).await;
        assert_body(s, &b, 401, "Unauthorized");
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), py())).await;
        assert_body(s, &b, 401, "Unauthorized");
        let (s, b) = app.call(Method::PUT, &format!("{TOOLS}/x"), &key, Some(json!({"tool_args": {}}))).await;
        assert_body(s, &b, 401, "Unauthorized");
        let (s, b) = app.call(Method::DELETE, &format!("{TOOLS}/x"), &key, None).await;
        assert_body(s, &b, 401, "Unauthorized");
        let (s, b) = read(app.http(Method::GET, TOOLS, None).send().await.unwrap()).await;
        assert_body(s, &b, 401, "Unauthorized");
        grant(&app, &uid, "ConfigureAgents").await;

        let (s, b) = app.call(Method::POST, TOOLS, &key, Some(json!({"tool_type": "general_code"}))).await;
        assert_body(s, &b, 400, "Failed to parse form data.");
        let (s, b) = post(&app, Some(&key), form(None, Some("{}"), py())).await;
        assert_body(s, &b, 400, "tool_type is required.");
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{not json"), py())).await;
        assert_body(s, &b, 400, "Invalid JSON format for tool_args.");
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), None)).await;
        assert_body(s, &b, 400, "The request does not contain a file.");
        let (s, b) = post(&app, Some(&key), form(Some("local_mcp"), Some("{}"), py())).await;
        assert_body(s, &b, 415, "Invalid file extension: .py. Allowed extensions are .zip.");
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), Some(("notes.txt", b"x".to_vec())))).await;
        assert_body(s, &b, 415, "Invalid file extension: .txt. Allowed extensions are .zip, .py.");
        let (s, b) = post(&app, Some(&key), form(Some("browser_action"), Some("{}"), Some(("script", b"x".to_vec())))).await;
        assert_body(s, &b, 415, "Invalid file extension: . Allowed extensions are .zip, .py.");
        let (s, b) = post(&app, Some(&key), form(Some("remote_mcp"), Some("{}"), Some(("servers.yaml", b"x".to_vec())))).await;
        assert_body(s, &b, 415, "Invalid file extension: .yaml. For remote_mcp, allowed extensions are .json.");
        let big = vec![b'#'; 20 * 1024 * 1024 + 1];
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), Some(("big.py", big)))).await;
        assert_body(s, &b, 413, "File is too large, maximum size is 20MB");
        // general_code: tool_name must name a top-level function of the file.
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some(r#"{"tool_name": "nope"}"#), py())).await;
        assert_eq!(s, 400, "{b}");
        assert!(b["message"].as_str().unwrap().contains("defines no top-level function nope"), "{b}");
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), Some(("other.py", ADD.as_bytes().to_vec())))).await;
        assert_eq!(s, 400, "the default tool_name (other) is no function of the file: {b}");
        assert!(tool_list(&app, &key).await.is_empty());

        // Update: tool_args required; a missing tool is 404.
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), py())).await;
        assert_eq!(s, 201, "{b}");
        let id = b[0]["agent_custom_tool_id"].as_str().unwrap().to_owned();
        let (s, b) = app.call(Method::PUT, &format!("{TOOLS}/{id}"), &key, Some(json!({}))).await;
        assert_body(s, &b, 400, "tool_args is required for update.");
        let (s, b) = app.call(Method::PUT, &format!("{TOOLS}/{id}"), &key, Some(json!({"tool_args": "{bad"}))).await;
        assert_body(s, &b, 400, "Invalid JSON format for tool_args.");
        let (s, b) = app
            .call(Method::PUT, &format!("{TOOLS}/00000000-0000-0000-0000-000000000000"), &key, Some(json!({"tool_args": {"description": "x"}})))
            .await;
        assert_body(s, &b, 404, "Custom agent tool not found or no changes made.");
        // A large upload (past gRPC's 4 MB default) goes through whole.
        let large = format!("{ADD}\n# {}\n", "x".repeat(6 << 20)).into_bytes();
        let (s, b) = post(&app, Some(&key), form(Some("general_code"), Some("{}"), Some(("add_numbers.py", large.clone())))).await;
        assert_eq!(s, 201, "{b}");
        let large_id = b[0]["agent_custom_tool_id"].as_str().unwrap();
        let r = app.http(Method::GET, &format!("{TOOLS}/{large_id}/download"), Some(&key)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.bytes().await.unwrap().len(), large.len());
        // Nothing changed: 404 too.
        let (s, b) = app.call(Method::PUT, &format!("{TOOLS}/{id}"), &key, Some(json!({"tool_args": {"description": ""}}))).await;
        assert_body(s, &b, 404, "Custom agent tool not found or no changes made.");
        app.stop().await;
    }

    async fn refused_archives_store_nothing(backend) {
        let app = plain_app(&backend).await;
        let key = configurer(&app, "alice").await;
        for (what, bytes) in [
            ("zip-slip", zip_of(&[("../evil.py", b"def evil(): pass")])),
            ("absolute path", zip_of(&[("/tmp/evil.py", b"def evil(): pass")])),
            ("symlink", symlink_zip()),
            ("bomb", bomb_zip()),
        ] {
            for kind in ["local_mcp", "general_code"] {
                let (s, b) = post(&app, Some(&key), form(Some(kind), Some(r#"{"tool_name": "evil"}"#), Some(("evil.zip", bytes.clone())))).await;
                assert_eq!(s, 400, "{what} as {kind}: {b}");
                assert!(b["message"].as_str().unwrap().starts_with("The archive was refused"), "{what}: {b}");
            }
        }
        assert!(tool_list(&app, &key).await.is_empty());
        let dir = app.data_dir().join("agent").join("custom_tools");
        assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing on disk");
        app.stop().await;
    }

    async fn custom_tools_round_trip_owner_only(backend) {
        let app = plain_app(&backend).await;
        let alice = configurer(&app, "alice").await;
        let bob = configurer(&app, "bob").await;

        let (s, b) = post(&app, Some(&alice), form(Some("general_code"), Some(r#"{"description": "sums"}"#), Some(("add_numbers.py", ADD.as_bytes().to_vec())))).await;
        assert_eq!(s, 201, "{b}");
        let id = b[0]["agent_custom_tool_id"].as_str().unwrap().to_owned();
        // A ZIP whose function file is named after the tool, the name given by `filename`.
        let zip = zip_of(&[("add_numbers.py", ADD.as_bytes()), ("data/readme.txt", b"hi")]);
        let f = form(Some("general_code"), Some(r#"{"should_unzip": true}"#), Some(("upload.bin", zip.clone())))
            .text("filename", "add_numbers.zip");
        let (s, b) = post(&app, Some(&alice), f).await;
        assert_eq!(s, 201, "{b}");
        let zip_id = b[0]["agent_custom_tool_id"].as_str().unwrap().to_owned();

        let list = tool_list(&app, &alice).await;
        assert_eq!(list.len(), 2, "{list:?}");
        let first = list.iter().find(|t| t["id"] == id.as_str()).unwrap();
        assert_eq!(first["tool_name"], "add_numbers");
        assert_eq!(first["tool_type"], "general_code");
        assert_eq!(first["owner_email"], "alice@example.com");
        assert!(first.get("file_name").is_none(), "{first}");
        assert_eq!(
            first["tool_args"],
            json!({"tool_name": "add_numbers", "description": "sums", "enable_by_default": true,
                   "tool_usage_mode": ["runner", "creator"], "should_unzip": false, "system_prompt": ""})
        );
        assert!(tool_list(&app, &bob).await.is_empty());

        let (s, one) = app.call(Method::GET, &format!("{TOOLS}/{zip_id}"), &alice, None).await;
        assert_eq!(s, 200, "{one}");
        assert_eq!(one["file_name"], "add_numbers.zip");
        assert_eq!(one["tool_args"]["should_unzip"], true);

        // PUT: JSON, and the client's multipart with tool_args as a JSON string.
        let (s, b) = app.call(Method::PUT, &format!("{TOOLS}/{id}"), &alice, Some(json!({"tool_args": {"enable_by_default": false}}))).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b, json!({"agent_custom_tool_id": id}));
        let r = app
            .http(Method::PUT, &format!("{TOOLS}/{id}"), Some(&alice))
            .multipart(Form::new().text("tool_args", r#"{"system_prompt": "Use it for sums."}"#))
            .send()
            .await
            .unwrap();
        let (s, b) = read(r).await;
        assert_eq!(s, 200, "{b}");
        let (_, one) = app.call(Method::GET, &format!("{TOOLS}/{id}"), &alice, None).await;
        assert_eq!(one["tool_args"]["enable_by_default"], false);
        assert_eq!(one["tool_args"]["system_prompt"], "Use it for sums.");
        assert_eq!(one["tool_args"]["description"], "sums");

        // Download: the bytes as sent, named as uploaded.
        let r = app.http(Method::GET, &format!("{TOOLS}/{zip_id}/download"), Some(&alice)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "application/octet-stream");
        let cd = r.headers()["content-disposition"].to_str().unwrap().to_owned();
        assert!(cd.contains("filename=\"add_numbers.zip\""), "{cd}");
        assert_eq!(r.bytes().await.unwrap().to_vec(), zip);

        // Bob: 404 on get, put, download; his delete counts 0 and deletes nothing.
        for (method, path, body) in [
            (Method::GET, format!("{TOOLS}/{id}"), None),
            (Method::PUT, format!("{TOOLS}/{id}"), Some(json!({"tool_args": {"description": "mine"}}))),
            (Method::GET, format!("{TOOLS}/{id}/download"), None),
        ] {
            let (s, b) = app.call(method.clone(), &path, &bob, body).await;
            assert_eq!(s, 404, "{method} {path}: {b}");
        }
        let (s, b) = app.call(Method::DELETE, &format!("{TOOLS}/{id}"), &bob, None).await;
        assert_eq!((s, b), (200, json!({"count": 0})));
        assert_eq!(tool_list(&app, &alice).await.len(), 2);

        // remote_mcp: one tool per server; no download.
        let config = json!({"mcpServers": {
            "weather": {"url": "https://weather.example/mcp", "transport": "http"},
            "search": {"url": "https://search.example/sse", "transport": "sse"}}});
        let args = json!({"mcp_config_json": config.to_string()}).to_string();
        let (s, b) = post(&app, Some(&alice), form(Some("remote_mcp"), Some(&args), None)).await;
        assert_eq!(s, 201, "{b}");
        let remote: Vec<String> = b.as_array().unwrap().iter().map(|e| e["agent_custom_tool_id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(remote.len(), 2, "{b}");
        let list = tool_list(&app, &alice).await;
        let weather = list.iter().find(|t| t["tool_name"] == "weather").unwrap();
        let own: Value = serde_json::from_str(weather["tool_args"]["mcp_config_json"].as_str().unwrap()).unwrap();
        assert_eq!(own, json!({"mcpServers": {"weather": config["mcpServers"]["weather"]}}));
        let (s, b) = app.call(Method::GET, &format!("{TOOLS}/{}/download", remote[0]), &alice, None).await;
        assert_eq!(s, 400, "{b}");
        let (s, b) = post(&app, Some(&alice), form(Some("remote_mcp"), Some(r#"{"mcp_config_json": "{}"}"#), None)).await;
        assert_eq!(s, 400, "no mcpServers: {b}");
        // The configuration as a .json file instead.
        let file = json!({"mcpServers": {"files": {"url": "https://files.example/mcp"}}}).to_string();
        let (s, b) = post(&app, Some(&alice), form(Some("remote_mcp"), Some("{}"), Some(("servers.json", file.into_bytes())))).await;
        assert_eq!(s, 201, "{b}");
        let from_file = b[0]["agent_custom_tool_id"].as_str().unwrap().to_owned();
        let (_, one) = app.call(Method::GET, &format!("{TOOLS}/{from_file}"), &alice, None).await;
        assert_eq!((&one["tool_name"], &one["file_name"]), (&json!("files"), &json!("servers.json")), "{one}");
        // A built-in tool's name is refused.
        let (s, b) = post(&app, Some(&alice), form(Some("general_code"), Some(r#"{"tool_name": "python"}"#), Some(("python.py", b"def python():\n    pass\n".to_vec())))).await;
        assert_eq!(s, 400, "{b}");
        assert!(b["message"].as_str().unwrap().contains("built-in"), "{b}");

        // DELETE: comma-separated, percent-encoded too; unknown ids count 0.
        let path = format!("{TOOLS}/{}%2C{}", remote[0], remote[1]);
        let (s, b) = app.call(Method::DELETE, &path, &alice, None).await;
        assert_eq!((s, b), (200, json!({"count": 2})));
        let path = format!("{TOOLS}/{id},{zip_id},{from_file},nope");
        let (s, b) = app.call(Method::DELETE, &path, &alice, None).await;
        assert_eq!((s, b), (200, json!({"count": 3})));
        assert!(tool_list(&app, &alice).await.is_empty());
        let (s, _) = app.call(Method::GET, &format!("{TOOLS}/{id}/download"), &alice, None).await;
        assert_eq!(s, 404);
        app.stop().await;
    }

    async fn a_general_code_function_is_called_by_the_agent_in_the_sandbox(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new("c1", "add_numbers", json!({"a": 40}))]),
            ScriptedTurn::calls(vec![ScriptedCall::new("c2", "add_numbers", json!({"a": -1}))]),
            ScriptedTurn::text("The sum is 42."),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (uid, alice) = app.user("alice").await;
        let (_, tools) = app.call(Method::GET, "/api/v1/agents/tools", &alice, None).await;
        let python = tools.as_array().unwrap().iter().find(|t| t["name"] == "python").unwrap();
        if python["enabled"] != true {
            docchat_common::testing::unavailable("general_code tools: no sandbox on this host (scripts/sandbox-runtime.sh installs bubblewrap)");
            app.stop().await;
            return;
        }
        grant(&app, &uid, "ConfigureAgents").await;
        let args = json!({"system_prompt": "Use add_numbers for sums."}).to_string();
        let (s, b) = post(&app, Some(&alice), form(Some("general_code"), Some(&args), Some(("add_numbers.py", ADD.as_bytes().to_vec())))).await;
        assert_eq!(s, 201, "{b}");
        // Enabled by default: listed among the caller's tools and in every run.
        let (_, tools) = app.call(Method::GET, "/api/v1/agents/tools", &alice, None).await;
        assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "add_numbers"), "{tools}");

        let chat = session(&app, &alice, None).await;
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "What is 40 plus 2?", "stream": true,
                   "llm_args": {"use_agent": true, "agent_tools": ["add_numbers"]},
                   "rag_config": {"rag_type": "agent_only"}}),
        )
        .await;
        lines.next(Duration::from_secs(10)).await.unwrap();
        let (body, last) = lines.rest(Duration::from_secs(60)).await;
        assert!(last["error"].is_null(), "{last}");
        assert_eq!(body, "The sum is 42.");
        let calls: Vec<Value> = upstream.bodies().into_iter().filter(|b| b["tools"].is_array()).collect();
        assert_eq!(calls.len(), 3, "{calls:?}");
        let offered = calls[0]["tools"].as_array().unwrap().iter()
            .find(|t| t["function"]["name"] == "add_numbers")
            .unwrap_or_else(|| panic!("add_numbers not offered: {}", calls[0]["tools"]));
        let params = &offered["function"]["parameters"];
        assert_eq!(params["properties"]["a"]["type"], "integer", "{params}");
        assert_eq!(params["properties"]["a"]["description"], "the first number", "{params}");
        assert_eq!(params["required"], json!(["a"]), "{params}");
        assert_eq!(params["properties"]["b"]["default"], 2, "{params}");
        assert!(offered["function"]["description"].as_str().unwrap().contains("Adds two numbers."), "{offered}");
        assert!(calls[0]["messages"].to_string().contains("Use add_numbers for sums."), "the system_prompt reached the model");
        let second = calls[1]["messages"].to_string();
        assert!(second.contains(r#"{\"sum\": 42}"#), "the function's result came back: {second}");
        // A function that raises: its traceback is the tool's error.
        let third = calls[2]["messages"].to_string();
        assert!(third.contains("ValueError: a must not be negative"), "the function's error came back: {third}");
        app.stop().await;
    }

    async fn generated_system_prompts_and_their_timeout(backend) {
        // Plain model calls (the prompt writer) answer after `delay` when asked about `slow`.
        // (a whole JSON answer: the prompt writer does not stream).
        let upstream = ScriptedHttp::start_streaming(Arc::new(|r: &SeenRequest| {
            let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            let delay = if body["messages"].to_string().contains("slow_add") {
                Duration::from_secs(4)
            } else {
                Duration::ZERO
            };
            let answer = json!({"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                "choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "Call add_numbers to add two integers."}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
            Streamed {
                status: 200,
                content_type: "application/json".into(),
                parts: vec![(delay, answer.to_string().into_bytes())],
            }
        }))
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let key = configurer(&app, "alice").await;
        let f = form(Some("general_code"), Some("{}"), Some(("add_numbers.py", ADD.as_bytes().to_vec())))
            .text("generate_system_prompt", "true");
        let (s, b) = post(&app, Some(&key), f).await;
        assert_eq!(s, 201, "{b}");
        let id = b[0]["agent_custom_tool_id"].as_str().unwrap();
        let (_, one) = app.call(Method::GET, &format!("{TOOLS}/{id}"), &key, None).await;
        assert_eq!(one["tool_args"]["system_prompt"], "Call add_numbers to add two integers.", "{one}");
        assert!(upstream.bodies().iter().any(|b| b["messages"].to_string().contains("def add_numbers")), "the model read the code");

        let slow = ADD.replace("add_numbers", "slow_add");
        let f = form(Some("general_code"), Some("{}"), Some(("slow_add.py", slow.into_bytes())))
            .text("generate_system_prompt", "true")
            .text("system_prompt_generation_timeout", "1");
        let (s, b) = post(&app, Some(&key), f).await;
        assert_eq!(s, 408, "{b}");
        assert_eq!(b["code"], 408, "{b}");
        assert_eq!(tool_list(&app, &key).await.len(), 1, "nothing stored past the timeout");
        app.stop().await;
    }
}
