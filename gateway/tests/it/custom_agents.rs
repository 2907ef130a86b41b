//! Custom agents through REST (SPEC.md "Custom agents", the client's /agents/keys): the
//! error table's exact bodies, the permission rules, another user's things are 404, and a
//! custom agent uploaded as a ZIP, associated with a tool, given a key and run by name in a
//! completion — in the sandbox — with the key never in an answer, its metadata or the log.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::testing::ScriptedTurn;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::agent::{agent_upstream, app_with_agent};
use crate::completions::{session, stream};
use crate::harness::{ADMIN_KEY, Stack, read};

/// A ZIP of `(path, bytes)` entries.
fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in files {
        out.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(data).unwrap();
    }
    out.finish().unwrap().into_inner()
}

/// Gives user `uid` a new role holding `permissions`.
pub(crate) async fn grant(app: &Stack, uid: &str, role: &str, permissions: &[&str]) {
    let (s, r) = app
        .call(
            Method::POST,
            "/api/v1/roles",
            ADMIN_KEY,
            Some(json!({"name": role, "description": role})),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let rid = r["id"].as_str().unwrap();
    for p in permissions {
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{rid}/permissions/{p}"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(s, 204, "{p}: {b}");
    }
    let (s, b) = app
        .call(
            Method::PUT,
            &format!("/api/v1/users/{uid}/roles/{role}"),
            ADMIN_KEY,
            None,
        )
        .await;
    assert_eq!(s, 204, "{b}");
}

async fn upload(app: &Stack, key: &str, form: Form) -> (u16, Value) {
    read(
        app.http(Method::POST, "/api/v1/agents/custom_agents", Some(key))
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn agent_form(file_name: &str, bytes: Vec<u8>, args: &str) -> Form {
    Form::new()
        .part("file", Part::bytes(bytes).file_name(file_name.to_owned()))
        .text("agent_type", "framework_3")
        .text("agent_args", args.to_owned())
}

/// SPEC.md's custom-agent error body, exactly.
fn exactly(got: (u16, Value), status: u16, message: &str) {
    assert_eq!(got, (status, json!({"code": status, "message": message})));
}

const ALL: [&str; 3] = ["ManageCustomAgent", "DeleteCustomAgent", "ConfigureAgents"];

docchat_common::backend_tests! {
    async fn custom_agent_errors_permissions_and_ownership(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        let (bob_id, bob) = app.user("bob").await;
        let zip = zip_of(&[
            ("helper/main.py", b"print('hi')"),
            ("helper/metadata.json", br#"{"description": "helps", "mcp_servers": {"weather": {"url": "x"}}}"#),
            ("helper/envs.json", br#"{"API_KEY": "required", "MODE": "fast"}"#),
        ]);

        // Without a key, or without the permission: 401 Unauthorized.
        exactly(read(app.http(Method::GET, "/api/v1/agents/custom_agents", None).send().await.unwrap()).await, 401, "Unauthorized");
        exactly(upload(&app, &alice, agent_form("a.zip", zip.clone(), "{}")).await, 401, "Unauthorized");
        let none = "00000000-0000-0000-0000-000000000000";
        exactly(app.call(Method::PUT, &format!("/api/v1/agents/custom_agents/{none}"), &alice, Some(json!({"agent_args": {}}))).await, 401, "Unauthorized");
        exactly(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agents/{none}"), &alice, None).await, 401, "Unauthorized");
        exactly(app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{none}/suggestions"), &alice, None).await, 401, "Unauthorized");
        exactly(app.call(Method::POST, "/api/v1/agents/custom_agent_tool_associations", &alice, Some(json!({"agent_id": none, "mcp_server_name": "x"}))).await, 401, "Unauthorized");
        // Reads need only a valid key.
        assert_eq!(app.call(Method::GET, "/api/v1/agents/custom_agents", &alice, None).await, (200, json!([])));

        // ManageCustomAgent alone: still no deletes, no suggestions.
        grant(&app, &alice_id, "agent-makers", &["ManageCustomAgent"]).await;
        let (s, created) = upload(&app, &alice, agent_form("a.zip", zip.clone(), r#"{"description": "d"}"#)).await;
        assert_eq!(s, 201, "{created}");
        let id = created[0]["agent_custom_agent_id"].as_str().unwrap().to_owned();
        exactly(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agents/{id}"), &alice, None).await, 401, "Unauthorized");
        exactly(app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}/suggestions"), &alice, None).await, 401, "Unauthorized");
        grant(&app, &alice_id, "agent-admins", &ALL).await;

        // The error table.
        exactly(
            read(app.http(Method::POST, "/api/v1/agents/custom_agents", Some(&alice)).header("content-type", "application/json").body("{}").send().await.unwrap()).await,
            400, "Failed to parse form data.",
        );
        exactly(upload(&app, &alice, Form::new().text("agent_type", "framework_1").text("agent_args", "{}")).await, 400, "The request does not contain a file.");
        exactly(upload(&app, &alice, agent_form("agent.tar", b"x".to_vec(), "{}")).await, 415, "Invalid file extension: .tar. Allowed extensions are .zip.");
        exactly(upload(&app, &alice, agent_form("a.zip", zip.clone(), "{not json")).await, 400, "Invalid JSON format for agent_args.");
        exactly(upload(&app, &alice, agent_form("big.zip", vec![0u8; 20 * 1024 * 1024 + 1], "{}")).await, 413, "File is too large, maximum size is 20MB");

        // A ZIP that climbs out is refused before anything is stored.
        let (s, e) = upload(&app, &alice, agent_form("evil.zip", zip_of(&[("evil/main.py", b"1"), ("../escaped.py", b"1")]), "{}")).await;
        assert_eq!(s, 400, "{e}");
        assert!(e["message"].as_str().unwrap().contains("'..'"), "{e}");
        assert_eq!(app.call(Method::GET, "/api/v1/agents/custom_agents", &alice, None).await.1.as_array().unwrap().len(), 1);

        // Uploaded again under the same name: the same agent. Two folders: two agents.
        let (s, again) = upload(&app, &alice, agent_form("a.zip", zip.clone(), r#"{"description": "d"}"#)).await;
        assert_eq!((s, again[0]["agent_custom_agent_id"].as_str()), (201, Some(id.as_str())));
        let two = zip_of(&[("one/main.py", b"1"), ("two/main.py", b"2")]);
        let (s, pair) = upload(&app, &alice, agent_form("two.zip", two, "{}").text("agent_name", "ignored")).await;
        assert_eq!(s, 201, "{pair}");
        assert_eq!(pair.as_array().unwrap().len(), 2);
        let solo = zip_of(&[("x/main.py", b"1")]);
        let (_, renamed) = upload(&app, &alice, agent_form("x.zip", solo, "{}").text("agent_name", "Renamed")).await;
        let renamed_id = renamed[0]["agent_custom_agent_id"].as_str().unwrap().to_owned();

        // Read back: the client's CustomAgentDetail.
        let (s, a) = app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}"), &alice, None).await;
        assert_eq!(s, 200, "{a}");
        // agent_type reads back as it was given (framework_3), not as the client's name.
        assert_eq!((a["agent_name"].as_str(), a["agent_type"].as_str()), (Some("helper"), Some("framework_3")));
        assert_eq!(a["agent_args"], json!({"description": "d"}));
        assert_eq!(a["owner_email"], "alice@example.com");
        assert_eq!(a["mcp_servers"], json!([{"tool_name": "weather", "tool_args": "{\"url\":\"x\"}", "associated_tool": null}]));
        let keys: Vec<(&str, &str)> = a["api_keys"].as_array().unwrap().iter()
            .map(|k| (k["env_key_name"].as_str().unwrap(), k["requirement_type"].as_str().unwrap())).collect();
        assert_eq!(keys, [("API_KEY", "required"), ("MODE", "optional_with_default")]);
        let (_, names) = app.call(Method::GET, "/api/v1/agents/custom_agents", &alice, None).await;
        let types: Vec<&str> = names.as_array().unwrap().iter().map(|a| a["agent_type"].as_str().unwrap()).collect();
        assert_eq!(types, ["framework_3"; 4]);
        let names: Vec<&str> = names.as_array().unwrap().iter().map(|a| a["agent_name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Renamed", "helper", "one", "two"]);

        // Update: agent_args required.
        exactly(app.call(Method::PUT, &format!("/api/v1/agents/custom_agents/{id}"), &alice, Some(json!({"mcp_servers_mapping": {}}))).await, 400, "agent_args is required.");
        // Nested past the parser's depth: the body's fault is said, not a missing field.
        let deep = format!("{{\"agent_args\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        let (s, e) = crate::harness::read(app.http(Method::PUT, &format!("/api/v1/agents/custom_agents/{id}"), Some(alice.as_str())).header("content-type", "application/json").body(deep).send().await.unwrap()).await;
        crate::harness::assert_error(s, &e, 400);
        assert!(e["message"].as_str().unwrap().contains("recursion limit"), "{e}");
        assert_eq!(
            app.call(Method::PUT, &format!("/api/v1/agents/custom_agents/{id}"), &alice, Some(json!({"agent_args": {"description": "new"}, "mcp_servers_mapping": {"weather": null}}))).await,
            (200, json!({"agent_custom_agent_id": id}))
        );

        // Stored keys: the value is never answered.
        let secret = "sk-never-shown-7781";
        let (s, key) = app.call(Method::POST, "/api/v1/agents/keys", &alice, Some(json!({"name": "openai", "type": "private", "value": secret, "description": "mine"}))).await;
        assert_eq!(s, 200, "{key}");
        assert!(!key.to_string().contains(secret), "{key}");
        assert_eq!((key["name"].as_str(), key["type"].as_str(), key["owner_email"].as_str()), (Some("openai"), Some("private"), Some("alice@example.com")));
        let key_id = key["id"].as_str().unwrap().to_owned();
        let (_, list) = app.call(Method::GET, "/api/v1/agents/keys", &alice, None).await;
        assert_eq!(list.as_array().unwrap().len(), 1);
        assert!(!list.to_string().contains(secret));
        let (s, upd) = app.call(Method::POST, &format!("/api/v1/agents/keys/{key_id}"), &alice, Some(json!({"description": "renamed", "value": "sk-other"}))).await;
        assert_eq!((s, upd["description"].as_str()), (200, Some("renamed")), "{upd}");
        assert!(!upd.to_string().contains("sk-other"));

        // Key association: the declared key gets the stored key; GET /agents shows it.
        let (s, ka) = app.call(Method::POST, "/api/v1/agents/custom_agent_key_associations", &alice, Some(json!({"agent_id": id, "env_key_name": "API_KEY", "key_id": key_id}))).await;
        assert_eq!(s, 200, "{ka}");
        assert_eq!((ka["key_name"].as_str(), ka["requirement_type"].as_str()), (Some("openai"), Some("required")));
        let (_, kas) = app.call(Method::GET, &format!("/api/v1/agents/custom_agent_key_associations?agent_id={id}"), &alice, None).await;
        assert_eq!(kas.as_array().unwrap().len(), 2, "{kas}");
        let (_, agents) = app.call(Method::GET, "/api/v1/agents", &alice, None).await;
        let helper = agents.as_array().unwrap().iter().find(|a| a["value"] == "helper").unwrap_or_else(|| panic!("{agents}"));
        assert_eq!((helper["type"].as_str(), helper["enabled"].as_bool(), helper["owner"].as_str()), (Some("openai"), Some(true), Some("alice@example.com")));
        assert_eq!(helper["api_keys"]["required"], json!([{"name": "API_KEY", "associated_key": {"id": key_id, "name": "openai", "owner_email": "alice@example.com"}}]));
        assert_eq!(helper["api_keys"]["optional"][0]["name"], "MODE");
        assert_eq!(helper["mcp_servers"][0]["tool_name"], "weather");
        let one = agents.as_array().unwrap().iter().find(|a| a["value"] == "one").unwrap();
        assert_eq!(one["enabled"], true, "no required key: enabled");

        // Tool associations: an unresolved one, listed by name, deleted.
        let (s, ta) = app.call(Method::POST, "/api/v1/agents/custom_agent_tool_associations", &alice, Some(json!({"agent_id": id, "mcp_server_name": "search", "tool_name": null}))).await;
        assert_eq!(s, 200, "{ta}");
        assert_eq!((ta["tool_id"].clone(), ta["tool_name"].clone(), ta["agent_name"].as_str()), (Value::Null, Value::Null, Some("helper")));
        let (_, tas) = app.call(Method::GET, "/api/v1/agents/custom_agent_tool_associations?agent_name=helper", &alice, None).await;
        assert_eq!(tas.as_array().unwrap().len(), 2, "{tas}");
        let (_, sug) = app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}/suggestions"), &alice, None).await;
        assert_eq!(sug, json!([{"mcp_servers": []}]), "one declared server, no MCP tools yet");

        // Bob sees none of it, and cannot touch it.
        exactly(
            app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}"), &bob, None).await,
            404, &format!("custom agent {id} not found"),
        );
        grant(&app, &bob_id, "bob-agents", &ALL).await;
        assert_eq!(app.call(Method::GET, "/api/v1/agents/custom_agents", &bob, None).await, (200, json!([])));
        assert_eq!(app.call(Method::PUT, &format!("/api/v1/agents/custom_agents/{id}"), &bob, Some(json!({"agent_args": {}}))).await.0, 404);
        assert_eq!(app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}/suggestions"), &bob, None).await.0, 404);
        assert_eq!(app.call(Method::POST, "/api/v1/agents/custom_agent_tool_associations", &bob, Some(json!({"agent_id": id, "mcp_server_name": "x"}))).await.0, 404);
        assert_eq!(app.call(Method::POST, "/api/v1/agents/custom_agent_key_associations", &bob, Some(json!({"agent_id": id, "env_key_name": "API_KEY", "key_id": key_id}))).await.0, 404);
        assert_eq!(app.call(Method::POST, &format!("/api/v1/agents/keys/{key_id}"), &bob, Some(json!({"description": "x"}))).await.0, 404);
        assert_eq!(app.call(Method::GET, "/api/v1/agents/custom_agent_tool_associations", &bob, None).await, (200, json!([])));
        assert_eq!(app.call(Method::GET, "/api/v1/agents/custom_agent_key_associations", &bob, None).await, (200, json!([])));
        let ta_id = ta["id"].as_str().unwrap();
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agent_tool_associations/{ta_id}"), &bob, None).await, (200, json!({"deleted_count": 0})));
        // Another user's key is not found, and nothing is deleted (alone or beside one's own).
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/agents/keys/{key_id}"), &bob, None).await;
        crate::harness::assert_error(s, &e, 404);
        let (s, bobs) = app.call(Method::POST, "/api/v1/agents/keys", &bob, Some(json!({"name": "b", "type": "private", "value": "v"}))).await;
        assert_eq!(s, 200, "{bobs}");
        let bobs = bobs["id"].as_str().unwrap();
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/agents/keys/{bobs}%2C{key_id}"), &bob, None).await;
        crate::harness::assert_error(s, &e, 404);
        assert_eq!(app.call(Method::GET, "/api/v1/agents/keys", &bob, None).await.1.as_array().unwrap().len(), 1, "all or nothing");
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/keys/{bobs}"), &bob, None).await, (204, Value::Null));
        assert_eq!(app.call(Method::GET, "/api/v1/agents/keys", &alice, None).await.1.as_array().unwrap().len(), 1, "bob's delete left alice's key");
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agents/{id}"), &bob, None).await, (200, json!({"count": 0})));

        // Alice's deletes.
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agent_tool_associations/{ta_id}"), &alice, None).await, (200, json!({"deleted_count": 1})));
        let ka_id = ka["id"].as_str().unwrap();
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agent_key_associations/{ka_id}"), &alice, None).await, (200, json!({"deleted_count": 1})));
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/custom_agents/{id}%2C{renamed_id}"), &alice, None).await, (200, json!({"count": 2})));
        assert_eq!(app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}"), &alice, None).await.0, 404);
        assert_eq!(app.call(Method::DELETE, &format!("/api/v1/agents/keys/{key_id}"), &alice, None).await, (204, Value::Null));
        assert_eq!(app.call(Method::GET, "/api/v1/agents/keys", &alice, None).await, (200, json!([])));
        app.stop().await;
    }

    async fn a_custom_agent_runs_in_the_sandbox_by_name_and_its_key_never_shows(backend) {
        let log = capture_log();
        let upstream = agent_upstream(vec![ScriptedTurn::text("the model was not asked")]).await;
        let app = app_with_agent(&backend, &upstream).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, tools) = app.call(Method::GET, "/api/v1/agents/tools", &alice, None).await;
        let python = tools.as_array().unwrap().iter().find(|t| t["name"] == "python").unwrap();
        if python["enabled"] != true {
            docchat_common::testing::unavailable("custom agents run in the sandbox: no sandbox on this host (scripts/sandbox-runtime.sh installs bubblewrap)");
            app.stop().await;
            return;
        }
        grant(&app, &alice_id, "agent-admins", &ALL).await;
        // The tool that serves the agent's declared server.
        let tool_id = remote_mcp_tool(&app, &alice, "weather").await;

        let main = br#"
import json, os, time
print("Hello from the custom agent")
time.sleep(1.5)
print("asked:", os.environ["AGENT_MESSAGE"])
servers = json.load(open(os.environ["AGENT_MCP_SERVERS_FILE"]))
print("servers:", ",".join(s["server"] + "=" + s["tool_type"] for s in servers))
history = json.load(open(os.environ["AGENT_HISTORY_FILE"]))
print("history:", len(history))
key = os.environ["WEATHER_KEY"]
print("key length", len(key))
print("echoing it:", key)
open("report.txt", "w").write("made by the agent\n")
"#;
        let zip = zip_of(&[
            ("forecaster/main.py", main),
            ("forecaster/metadata.json", br#"{"mcp_servers": {"weather": {}}}"#),
            ("forecaster/envs.json", br#"{"WEATHER_KEY": "required"}"#),
        ]);
        let (s, created) = upload(&app, &alice, agent_form("f.zip", zip, "{}")).await;
        assert_eq!(s, 201, "{created}");
        let id = created[0]["agent_custom_agent_id"].as_str().unwrap().to_owned();
        let (_, a) = app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}"), &alice, None).await;
        assert_eq!(a["mcp_servers"][0]["associated_tool"]["id"].as_str(), Some(tool_id.as_str()), "auto-associated by name: {a}");
        let (_, agents) = app.call(Method::GET, "/api/v1/agents", &alice, None).await;
        let listed = agents.as_array().unwrap().iter().find(|a| a["value"] == "forecaster").unwrap();
        assert_eq!(listed["enabled"], false, "its required key is not given yet");

        let secret = "wx-SECRET-value-90210";
        let (_, key) = app.call(Method::POST, "/api/v1/agents/keys", &alice, Some(json!({"name": "weather", "type": "private", "value": secret}))).await;
        let (s, ka) = app.call(Method::POST, "/api/v1/agents/custom_agent_key_associations", &alice, Some(json!({"agent_id": id, "env_key_name": "WEATHER_KEY", "key_id": key["id"]}))).await;
        assert_eq!(s, 200, "{ka}");

        // A name that is neither built in nor a custom agent of hers: 400.
        let chat = session(&app, &alice, None).await;
        let (s, e) = app.call(Method::POST, &format!("/api/v1/chats/{chat}/completions"), &alice,
            Some(json!({"message": "x", "llm_args": {"use_agent": true, "agent_type": "nobody"}, "rag_config": {"rag_type": "agent_only"}}))).await;
        assert_eq!(s, 400, "{e}");
        assert!(e["message"].as_str().unwrap().contains("unknown agent_type \"nobody\""), "{e}");

        let mut lines = stream(&app, &alice, &chat, json!({
            "message": "Forecast for Paris?", "stream": true,
            "llm_args": {"use_agent": true, "agent_type": "forecaster"},
            "rag_config": {"rag_type": "agent_only"},
        })).await;
        // The first line arrives while the agent still runs (it sleeps after printing it).
        let mut body = String::new();
        while !body.contains("Hello from the custom agent") {
            let line = lines.next(Duration::from_secs(60)).await.expect("a first line");
            assert_ne!(line["finished"], true, "{line}");
            body.push_str(line["body"].as_str().unwrap_or(""));
        }
        let first_at = std::time::Instant::now();
        let (rest, last) = lines.rest(Duration::from_secs(60)).await;
        assert!(first_at.elapsed() >= Duration::from_secs(1), "the answer was streamed as it came, not at the end");
        body.push_str(&rest);
        assert!(last.get("error").is_none(), "{last}");
        assert!(body.contains("Hello from the custom agent"), "{body}");
        assert!(body.contains("asked: Forecast for Paris?"), "{body}");
        assert!(body.contains("servers: weather=remote_mcp"), "{body}");
        assert!(body.contains(&format!("key length {}", secret.len())), "{body}");
        assert!(body.contains("echoing it: [redacted]"), "{body}");
        assert!(body.contains("report.txt"), "the file it wrote is stored and linked: {body}");
        assert!(upstream.bodies().iter().all(|b| !b["tools"].is_array()), "the model loop did not run");

        let reply = last["message_id"].as_str().unwrap();
        let (_, meta) = app.call(Method::GET, &format!("/api/v1/messages/{reply}/meta"), &alice, None).await;
        let (_, messages) = app.call(Method::GET, &format!("/api/v1/chats/{chat}/messages"), &alice, None).await;
        let (_, files) = app.call(Method::GET, &format!("/api/v1/chats/{chat}/agent_server_files"), &alice, None).await;
        assert!(files.to_string().contains("report.txt"), "{files}");
        let (_, detail) = app.call(Method::GET, &format!("/api/v1/agents/custom_agents/{id}"), &alice, None).await;
        for (what, v) in [("stream", Value::String(body.clone())), ("last line", last.clone()), ("metadata", meta), ("messages", messages), ("files", files), ("agent", detail), ("agents", agents)] {
            assert!(!v.to_string().contains(secret), "the key's value is in the {what}: {v}");
        }
        app.stop().await;
        let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        assert!(log.len() > 1000, "the log was captured ({} bytes)", log.len());
        assert!(!log.contains(secret), "the key's value is in the log");
    }
}

/// Inserts a remote_mcp custom tool row of `owner`'s named `name`; its id.
async fn remote_mcp_tool(app: &Stack, key: &str, name: &str) -> String {
    let config = json!({"mcpServers": {name: {"url": "https://mcp.example.com/mcp"}}}).to_string();
    let args = json!({"mcp_config_json": config, "description": "forecasts"}).to_string();
    let (s, b) = crate::custom_tools::post(
        app,
        Some(key),
        crate::custom_tools::form(Some("remote_mcp"), Some(&args), None),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    b[0]["agent_custom_tool_id"].as_str().unwrap().to_owned()
}

/// Everything logged from now on (debug and up, every target), kept in memory. Each test
/// runs in its own process under nextest, so the global subscriber is this test's.
fn capture_log() -> Arc<Mutex<Vec<u8>>> {
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(buf.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber)
        .expect("the log capture is this test process's only subscriber");
    buf
}
