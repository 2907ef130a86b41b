//! The agent through REST: llm_args' agent_* keys reach agent-service, its answer streams
//! as JSON lines, agentic_rag's search hits become the reply's references, its trace the
//! reply's metadata.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn, SeenRequest};
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{collection_with, session, stream};
use crate::harness::{Stack, assert_error};

/// Requests offering tools get the agent's turns in order; every other model call (none
/// expected, but ingestion may summarize) a plain answer.
pub(crate) async fn agent_upstream(turns: Vec<ScriptedTurn>) -> ScriptedHttp {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    ScriptedHttp::start_streaming(Arc::new(move |r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if body["tools"].is_array() {
            let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            turns.get(n).or(turns.last()).unwrap().streamed()
        } else {
            ScriptedTurn::text("A summary.").streamed()
        }
    }))
    .await
}

pub(crate) async fn app_with_agent(
    backend: &docchat_common::testing::Backend,
    upstream: &ScriptedHttp,
) -> Stack {
    Stack::builder(backend)
        .everything()
        .tool_models(&upstream.base_url)
        .start()
        .await
}

docchat_common::backend_tests! {
    async fn agentic_rag_answers_through_rest_with_references_and_its_trace(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "search_documents",
                json!({"query": "Where is the Eiffel Tower?"}),
            )]),
            ScriptedTurn::text("It is in Paris."),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection_with(
            &app,
            &alice,
            "paris.txt",
            b"The Eiffel Tower stands in Paris, on the Champ de Mars.".to_vec(),
        )
        .await;
        let chat = session(&app, &alice, Some(&cid)).await;

        // A bad agent_* value is a 400 that stores nothing.
        let path = format!("/api/v1/chats/{chat}/completions");
        let (s, e) = app
            .call(
                Method::POST,
                &path,
                &alice,
                Some(json!({"message": "x", "llm_args": {"agent_tools": ["nope"]}, "rag_config": {"rag_type": "agentic_rag"}})),
            )
            .await;
        assert_error(s, &e, 400);
        assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");

        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Where is the Eiffel Tower?", "stream": true,
                   "llm_args": {"agent_tools": ["search_documents"], "agent_max_turns": 4},
                   "rag_config": {"rag_type": "agentic_rag"}}),
        )
        .await;
        let first = lines.next(Duration::from_secs(10)).await.unwrap();
        assert!(first["question_id"].is_string(), "{first}");
        let (body, last) = lines.rest(Duration::from_secs(30)).await;
        assert_eq!(body, "It is in Paris.", "{}", backend.name);
        assert!(last["error"].is_null(), "{last}");
        let reply = last["message_id"].as_str().unwrap().to_owned();

        let (s, refs) = app
            .call(Method::GET, &format!("/api/v1/messages/{reply}/references"), &alice, None)
            .await;
        assert_eq!(s, 200, "{refs}");
        assert_eq!(refs[0]["document_name"], "paris.txt", "{refs}");
        assert!(refs[0]["content"].as_str().unwrap().contains("Eiffel"), "{refs}");
        let (s, meta) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply}/meta?info_type=agent_chat_history_md"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200, "{meta}");
        assert!(meta[0]["content"].as_str().unwrap().contains("search_documents"), "{meta}");
        // The model was given the search's hits, and only the tool it was allowed.
        let agent_calls: Vec<Value> = upstream
            .bodies()
            .into_iter()
            .filter(|b| b["tools"].is_array())
            .collect();
        assert_eq!(agent_calls.len(), 2, "{}", backend.name);
        assert_eq!(agent_calls[0]["tools"].as_array().unwrap().len(), 1);
        assert!(agent_calls[1]["messages"].to_string().contains("Champ de Mars"));

        let (s, e) = app
            .call(Method::GET, &format!("/api/v1/messages/{reply}/meta?info_type=agent_chat_history"), &bob, None)
            .await;
        assert_error(s, &e, 404);
        app.stop().await;
    }

    async fn agent_tools_preferences_and_agents_through_rest(backend) {
        let upstream = agent_upstream(vec![ScriptedTurn::text("unused")]).await;
        let app = app_with_agent(&backend, &upstream).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;

        let (s, tools) = app.call(Method::GET, "/api/v1/agents/tools", &alice, None).await;
        assert_eq!(s, 200, "{tools}");
        let write = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "write_file")
            .unwrap_or_else(|| panic!("no write_file in {tools}"));
        assert_eq!(write["enabled"], true);
        assert_eq!(write["api_keys"], json!({"required": [], "optional": [], "internal": []}));

        let pref = "/api/v1/agents/tool_preference";
        let get = |key: String| {
            let app = &app;
            async move { app.call(Method::GET, pref, &key, None).await }
        };
        assert_eq!(get(alice.clone()).await, (200, json!([])));
        let (s, _) = app
            .call(Method::POST, pref, &alice, Some(json!({"reference_value": ["read_file", "write_file"]})))
            .await;
        assert_eq!(s, 204);
        assert_eq!(get(alice.clone()).await, (200, json!(["read_file", "write_file"])));
        assert_eq!(get(bob.clone()).await, (200, json!([])), "a preference is the caller's own");
        let (s, e) = app
            .call(Method::POST, pref, &alice, Some(json!({"reference_value": ["rm_rf"]})))
            .await;
        assert_error(s, &e, 400);
        let (s, e) = app.call(Method::POST, pref, &alice, Some(json!({"tools": []}))).await;
        assert_error(s, &e, 400);
        assert_eq!(get(alice.clone()).await, (200, json!(["read_file", "write_file"])), "a refused change changes nothing");
        let (s, _) = app.call(Method::DELETE, pref, &alice, None).await;
        assert_eq!(s, 204);
        assert_eq!(get(alice.clone()).await, (200, json!([])));

        let (s, agents) = app.call(Method::GET, "/api/v1/agents", &alice, None).await;
        assert_eq!(s, 200, "{agents}");
        let general = agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["value"] == "general")
            .unwrap_or_else(|| panic!("no general agent in {agents}"));
        assert_eq!(general["type"], "built_in");
        assert!(general["owner"].is_null(), "{general}");

        let r = app.http(Method::GET, "/api/v1/agents/tools", None).send().await.unwrap();
        assert_eq!(r.status(), 401);
        app.stop().await;
    }

    async fn fast_agentic_rag_puts_the_contexts_up_front_and_keeps_the_conversation(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::text("On the Champ de Mars."),
            ScriptedTurn::text("In 1889."),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (_, alice) = app.user("alice").await;
        let cid = collection_with(
            &app,
            &alice,
            "paris.txt",
            b"The Eiffel Tower stands in Paris, on the Champ de Mars.".to_vec(),
        )
        .await;
        let chat = session(&app, &alice, Some(&cid)).await;
        let path = format!("/api/v1/chats/{chat}/completions");
        let ask = |message: &str| {
            json!({"message": message, "llm_args": {"agent_tools": ["list_files"]},
                   "rag_config": {"rag_type": "fast_agentic_rag"}})
        };
        let (s, first) = app
            .call(Method::POST, &path, &alice, Some(ask("Where is the Eiffel Tower?")))
            .await;
        assert_eq!(s, 200, "{first}");
        assert_eq!(first["body"], "On the Champ de Mars.");
        let reply = first["message_id"].as_str().unwrap();
        let (_, refs) = app
            .call(Method::GET, &format!("/api/v1/messages/{reply}/references"), &alice, None)
            .await;
        assert_eq!(refs[0]["document_name"], "paris.txt", "{refs}");

        let (s, second) = app
            .call(Method::POST, &path, &alice, Some(ask("When was it built?")))
            .await;
        assert_eq!(s, 200, "{second}");
        assert_eq!(second["body"], "In 1889.");
        let calls: Vec<Value> = upstream
            .bodies()
            .into_iter()
            .filter(|b| b["tools"].is_array())
            .collect();
        assert_eq!(calls.len(), 2, "{}", backend.name);
        // The retrieved passage is in the system prompt before the model is asked anything.
        assert_eq!(calls[0]["messages"][0]["role"], "system");
        assert!(
            calls[0]["messages"][0]["content"].as_str().unwrap().contains("Champ de Mars"),
            "{}",
            calls[0]["messages"][0]
        );
        // The second run sees the first question and answer.
        let second_messages = calls[1]["messages"].to_string();
        assert!(second_messages.contains("Where is the Eiffel Tower?"), "{second_messages}");
        assert!(second_messages.contains("On the Champ de Mars."), "{second_messages}");
        app.stop().await;
    }

    async fn files_past_the_agent_document_limit_are_named_in_the_reply(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![
                ScriptedCall::new("c1", "write_file", json!({"path": "a.txt", "content": "A"})),
                ScriptedCall::new("c2", "write_file", json!({"path": "b.txt", "content": "B"})),
                ScriptedCall::new("c3", "write_file", json!({"path": "c.txt", "content": "C"})),
            ]),
            ScriptedTurn::text("Done."),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (alice_id, alice) = app.user("alice").await;
        // Resolved settings are cached: read the limit below at once.
        crate::harness::set_global(&app, "config_cache_ttl_seconds", "0").await;
        crate::harness::configure(
            &app,
            &format!("/api/v1/users/{alice_id}/configurations/agents_document_limit_per_user"),
            "1",
        )
        .await;
        let chat = session(&app, &alice, None).await;
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Write three files.", "stream": true,
                   "llm_args": {"use_agent": true, "agent_tools": ["write_file"]},
                   "rag_config": {"rag_type": "agent_only"}}),
        )
        .await;
        lines.next(Duration::from_secs(10)).await.unwrap();
        let (body, last) = lines.rest(Duration::from_secs(30)).await;
        assert!(last["error"].is_null(), "{last}");
        assert!(body.contains("Done."), "{}: {body}", backend.name);
        // One file is stored; the reply names the two that were not, and why.
        assert!(body.contains("were not stored"), "{}: {body}", backend.name);
        let unstored: Vec<&str> = ["a.txt", "b.txt", "c.txt"]
            .into_iter()
            .filter(|f| body.contains(&format!("{f}: not stored")))
            .collect();
        assert_eq!(unstored.len(), 2, "{}: {body}", backend.name);
        assert!(body.contains("limit"), "{}: {body}", backend.name);
        app.stop().await;
    }

    async fn python_runs_in_the_sandbox_and_a_cost_cap_reached_mid_run_ends_it_with_an_error_line(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "python",
                json!({"code": "import time\nopen('answer.txt', 'w').write(str(6 * 7))\nprint('wrote', open('answer.txt').read())\ntime.sleep(1.5)"}),
            )])
            .usage(100, 50),
            ScriptedTurn::text("never said"),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, tools) = app.call(Method::GET, "/api/v1/agents/tools", &alice, None).await;
        let python = tools.as_array().unwrap().iter().find(|t| t["name"] == "python").unwrap();
        if python["enabled"] != true {
            docchat_common::testing::unavailable("the agent's python tool: no sandbox on this host (scripts/sandbox-runtime.sh installs bubblewrap)");
            app.stop().await;
            return;
        }
        // One call costs 0.15: the second is over the cap.
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/users/{alice_id}/configurations/max_llm_cost_per_user"),
                crate::harness::ADMIN_KEY,
                Some(json!({"string_value": "0.1"})),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        let chat = session(&app, &alice, None).await;
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "What is six times seven? Use Python.", "stream": true,
                   "llm_args": {"use_agent": true, "agent_tools": ["python"]},
                   "rag_config": {"rag_type": "agent_only"}}),
        )
        .await;
        lines.next(Duration::from_secs(10)).await.unwrap();
        let (_, last) = lines.rest(Duration::from_secs(30)).await;
        let error = last["error"].as_str().unwrap_or_else(|| panic!("an error line, not {last}"));
        assert!(error.contains("max_llm_cost_per_user"), "{error}");
        let reply = last["message_id"].as_str().unwrap();
        let (_, trace) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply}/meta?info_type=agent_chat_history_md"),
                &alice,
                None,
            )
            .await;
        let trace = trace[0]["content"].as_str().unwrap();
        assert!(trace.contains("wrote 42"), "python ran in the sandbox and the model saw it: {trace}");
        let tool_calls: Vec<Value> = upstream
            .bodies()
            .into_iter()
            .filter(|b| b["tools"].is_array())
            .collect();
        assert_eq!(tool_calls.len(), 1, "{}: the capped second call was made", backend.name);
        app.stop().await;
    }
}
