//! Memory blocks in agent runs through REST: agent_file (a file of the workspace, saved back
//! after the run) and agent_tool (the `memory` tool), with the owner's and other users'
//! shares deciding what is kept.

use std::sync::Arc;

use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn, SeenRequest};
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::session;
use crate::harness::Stack;

const EDIT: &str = "svc/memory_block/edit";

/// A model whose turns are written in the question: a JSON list of turns, each a list of
/// `[tool, arguments]` calls made one turn after another; after the last turn it answers
/// the tool results it was given, joined by ` | ` (so a test reads them in the answer).
async fn scripted_by_question() -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(|r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if !body["tools"].is_array() {
            return ScriptedTurn::text("A summary.").streamed();
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let asked = messages
            .iter()
            .rposition(|m| m["role"] == "user")
            .unwrap_or(0);
        let turns: Vec<Vec<(String, Value)>> =
            serde_json::from_str(messages[asked]["content"].as_str().unwrap_or("[]"))
                .unwrap_or_default();
        let after = &messages[asked + 1..];
        let n = after.iter().filter(|m| m["role"] == "assistant").count();
        match turns.get(n) {
            Some(calls) => ScriptedTurn::calls(
                calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        ScriptedCall::new(&format!("c{n}-{i}"), name, args.clone())
                    })
                    .collect(),
            )
            .streamed(),
            None => {
                let results: Vec<&str> = after
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .filter_map(|m| m["content"].as_str())
                    .collect();
                ScriptedTurn::text(&format!("Results: {}", results.join(" | "))).streamed()
            }
        }
    }))
    .await
}

struct Run {
    answer: String,
    prompt_raw: String,
    history: String,
}

/// One agent run of `key` in `chat` with the scripted `turns`: its answer, prompt_raw and
/// agent_chat_history.
async fn agent_run(app: &Stack, key: &str, chat: &str, args: Value, turns: Value) -> Run {
    let mut llm_args = json!({"use_agent": true, "agent_tools": ["read_file", "write_file"], "agent_max_turns": 6});
    llm_args
        .as_object_mut()
        .unwrap()
        .extend(args.as_object().unwrap().clone());
    let (s, a) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(
                json!({"message": turns.to_string(), "stream": false, "llm_args": llm_args,
                        "rag_config": {"rag_type": "agent_only"}}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{a}");
    let reply = a["message_id"].as_str().unwrap().to_owned();
    let meta = |kind: &'static str| {
        let reply = reply.clone();
        async move {
            let (s, m) = app
                .call(
                    Method::GET,
                    &format!("/api/v1/messages/{reply}/meta?info_type={kind}"),
                    key,
                    None,
                )
                .await;
            assert_eq!(s, 200, "{m}");
            m[0]["content"].as_str().unwrap_or_default().to_owned()
        }
    };
    Run {
        answer: a["body"].as_str().unwrap_or_default().to_owned(),
        prompt_raw: meta("prompt_raw").await,
        history: meta("agent_chat_history").await,
    }
}

async fn create(app: &Stack, key: &str, body: Value) -> String {
    let (s, b) = app
        .call(Method::POST, "/api/v1/memory_blocks", key, Some(body))
        .await;
    assert_eq!(s, 201, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

async fn content(app: &Stack, key: &str, id: &str) -> String {
    let (s, b) = app
        .call(
            Method::GET,
            &format!("/api/v1/memory_blocks/{id}"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["content"].as_str().unwrap().to_owned()
}

/// Shares `id` with `username`, with edit or read only.
async fn share(app: &Stack, owner: &str, id: &str, username: &str, edit: bool) {
    let body = if edit {
        json!({"permissions": [EDIT]})
    } else {
        json!({})
    };
    let (s, e) = app
        .call(
            Method::PUT,
            &format!("/api/v1/memory_blocks/{id}/permissions/{username}"),
            owner,
            Some(body),
        )
        .await;
    assert_eq!(s, 204, "{e}");
}

/// The names and descriptions of the tools the model was offered in its last agent call.
fn offered(model: &ScriptedHttp) -> Vec<(String, String)> {
    let last = model
        .bodies()
        .into_iter()
        .rfind(|b| b["tools"].is_array())
        .unwrap();
    last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                t["function"]["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// One turn: read_file of `path`.
fn read(path: &str) -> Value {
    json!([["read_file", {"path": path}]])
}

/// One turn: write_file of `text` to `path`.
fn write(path: &str, text: &str) -> Value {
    json!([["write_file", {"path": path, "content": text}]])
}

docchat_common::backend_tests! {
    /// agent_file: the block is `.memory/<name>.md` in the workspace (prompt_raw says so);
    /// what the agent leaves there is saved back with edit access, not over the limit (the
    /// answer says why) and not from a read-only share; an edit share saves from the other
    /// user's run.
    async fn memory_agent_file_is_read_and_saved_back(backend) {
        let model = scripted_by_question().await;
        let app = crate::agent::app_with_agent(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let id = create(&app, &alice, json!({"name": "prefs", "content": "ALICE LIKES TEA",
            "injection_mode": "agent_file", "max_content_length": 40,
            "system_prompt_amendment": "KEEP IT SHORT"})).await;
        let chat = session(&app, &alice, None).await;
        let by_id = json!({"memory_block_id": id});
        let file = ".memory/prefs.md";

        // Read, then rewrite: the content arrives and the new one is kept.
        let turns = json!([read(file), write(file, "ALICE LIKES COFFEE")]);
        let r = agent_run(&app, &alice, &chat, by_id.clone(), turns).await;
        assert!(r.answer.contains("ALICE LIKES TEA"), "{}: {}", backend.name, r.answer);
        assert!(r.prompt_raw.contains(file) && r.prompt_raw.contains("saved back") && r.prompt_raw.contains("KEEP IT SHORT"), "{}", r.prompt_raw);
        assert!(!r.prompt_raw.contains("ALICE LIKES TEA"), "the content went into the prompt: {}", r.prompt_raw);
        assert_eq!(content(&app, &alice, &id).await, "ALICE LIKES COFFEE");
        assert!(r.history.contains("saved from"), "{}", r.history);

        // The next run starts from the block's content (not the workspace's leftovers).
        let r = agent_run(&app, &alice, &chat, by_id.clone(), json!([read(file)])).await;
        assert!(r.answer.contains("ALICE LIKES COFFEE"), "{}", r.answer);

        // Over the limit: unchanged, and the answer says why.
        let long = "X".repeat(41);
        let r = agent_run(&app, &alice, &chat, by_id.clone(), json!([write(file, &long)])).await;
        assert_eq!(content(&app, &alice, &id).await, "ALICE LIKES COFFEE");
        assert!(r.answer.contains("was not updated") && r.answer.contains("41 characters"), "{}", r.answer);

        // Bob, read-only share: he reads it, his edit is not kept (and he is told in the prompt).
        share(&app, &alice, &id, "bob", false).await;
        let bobs = session(&app, &bob, None).await;
        let turns = json!([read(file), write(file, "BOB WAS HERE")]);
        let r = agent_run(&app, &bob, &bobs, by_id.clone(), turns.clone()).await;
        assert!(r.answer.contains("ALICE LIKES COFFEE"), "{}", r.answer);
        assert!(r.prompt_raw.contains("not kept"), "{}", r.prompt_raw);
        assert_eq!(content(&app, &alice, &id).await, "ALICE LIKES COFFEE");
        assert!(r.history.contains("read-only"), "{}", r.history);

        // With edit: his run saves it.
        share(&app, &alice, &id, "bob", true).await;
        agent_run(&app, &bob, &bobs, by_id.clone(), turns).await;
        assert_eq!(content(&app, &alice, &id).await, "BOB WAS HERE");
        app.stop().await;
    }

    /// agent_tool: the `memory` tool is offered only with such a block (its description
    /// names it); read answers the content; replace and append change it with edit access,
    /// within the limit; a read-only share's update is refused and changes nothing.
    async fn memory_agent_tool_reads_and_updates_the_block(backend) {
        let model = scripted_by_question().await;
        let app = crate::agent::app_with_agent(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let id = create(&app, &alice, json!({"name": "team notes", "content": "LIKES TEA",
            "injection_mode": "agent_tool", "max_content_length": 30})).await;
        let chat = session(&app, &alice, None).await;
        let by_id = json!({"memory_block_id": id});
        let mem = |args: Value| json!([["memory", args]]);
        let turns = Value::Array;

        // Without a block, no memory tool.
        agent_run(&app, &alice, &chat, json!({}), json!([])).await;
        assert!(!offered(&model).iter().any(|(n, _)| n == "memory"), "{:?}", offered(&model));

        let r = agent_run(&app, &alice, &chat, by_id.clone(), turns(vec![
            mem(json!({"action": "read"})),
            mem(json!({"action": "replace", "content": "LIKES COFFEE"})),
            mem(json!({"action": "append", "content": " AND CAKE"})),
        ])).await;
        assert!(r.answer.starts_with("Results: LIKES TEA |"), "{}: {}", backend.name, r.answer);
        assert_eq!(content(&app, &alice, &id).await, "LIKES COFFEE AND CAKE");
        let tools = offered(&model);
        assert!(tools.iter().any(|(n, d)| n == "memory" && d.contains("team notes")), "{tools:?}");
        assert!(r.prompt_raw.contains("`memory` tool"), "{}", r.prompt_raw);

        // Over the limit (replace or append): refused, unchanged.
        let r = agent_run(&app, &alice, &chat, by_id.clone(), turns(vec![
            mem(json!({"action": "replace", "content": "Y".repeat(31)})),
            mem(json!({"action": "append", "content": "Z".repeat(10)})),
        ])).await;
        assert_eq!(content(&app, &alice, &id).await, "LIKES COFFEE AND CAKE");
        assert_eq!(r.answer.matches("not saved").count(), 2, "{}", r.answer);

        // Bob with a read-only share reads, and is refused an update.
        share(&app, &alice, &id, "bob", false).await;
        let bobs = session(&app, &bob, None).await;
        let r = agent_run(&app, &bob, &bobs, by_id.clone(), turns(vec![
            mem(json!({"action": "read"})),
            mem(json!({"action": "append", "content": " BOB"})),
        ])).await;
        assert!(r.answer.contains("LIKES COFFEE AND CAKE") && r.answer.contains("read-only"), "{}", r.answer);
        assert!(r.prompt_raw.contains("read-only"), "{}", r.prompt_raw);
        assert_eq!(content(&app, &alice, &id).await, "LIKES COFFEE AND CAKE");

        // With edit, his append lands.
        share(&app, &alice, &id, "bob", true).await;
        agent_run(&app, &bob, &bobs, by_id, turns(vec![mem(json!({"action": "append", "content": " BOB"}))])).await;
        assert_eq!(content(&app, &alice, &id).await, "LIKES COFFEE AND CAKE BOB");
        app.stop().await;
    }
}
