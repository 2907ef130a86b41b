//! The files an agent wrote in a session, through REST: listed, measured (per session, per
//! directory, over all of the caller's sessions), deleted; another user sees none of it.

use std::time::Duration;

use docchat_common::testing::{ScriptedCall, ScriptedTurn};
use reqwest::Method;
use serde_json::json;

use crate::agent::{agent_upstream, app_with_agent};
use crate::completions::{session, stream};
use crate::harness::assert_error;

docchat_common::backend_tests! {
    async fn an_agents_files_are_listed_measured_and_deleted_by_their_owner_only(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "write_file",
                json!({"path": "notes/plan.md", "content": "step one"}),
            )]),
            ScriptedTurn::text("Planned."),
        ])
        .await;
        let app = app_with_agent(&backend, &upstream).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        let files = format!("/api/v1/chats/{chat}/agent_server_files");
        let stats = format!("/api/v1/chats/{chat}/agent_server_directories/stats");

        // Before any run: nothing, not an error.
        let (s, body) = app.call(Method::GET, &files, &alice, None).await;
        assert_eq!((s, body), (200, json!([])), "{}", backend.name);
        let (s, body) = app.call(Method::GET, &stats, &alice, None).await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(body[0]["is_empty"], true, "{body}");

        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Write the plan", "stream": true,
                   "llm_args": {"use_agent": true, "agent_tools": ["write_file"], "agent_max_turns": 4},
                   "rag_config": {"rag_type": "agent_only"}}),
        )
        .await;
        let (body, last) = lines.rest(Duration::from_secs(30)).await;
        assert!(last["error"].is_null(), "{last}");
        assert!(body.contains("Planned."), "{body}");

        let (s, list) = app.call(Method::GET, &files, &alice, None).await;
        assert_eq!(s, 200, "{list}");
        let list = list.as_array().unwrap().clone();
        assert_eq!(list.len(), 1, "{list:?}");
        let f = &list[0];
        assert_eq!(f["filename"], "notes/plan.md", "{f}");
        assert_eq!(f["bytes"], 8, "{f}");
        assert!(f["created_at"].as_i64().is_some_and(|t| t > 0), "{f}");
        assert!(f["id"].is_string() && f["object"].is_string() && f["purpose"].is_string(), "{f}");
        let (_, again) = app.call(Method::GET, &files, &alice, None).await;
        assert_eq!(again[0]["id"], f["id"], "a file's id is stable");

        let (s, d0) = app.call(Method::GET, &format!("{stats}?detail_level=0"), &alice, None).await;
        assert_eq!(s, 200, "{d0}");
        let d = &d0[0];
        assert_eq!(d["id"], chat.as_str(), "{d}");
        assert_eq!((d["file_count"].as_i64(), d["directory_count"].as_i64(), d["size_bytes"].as_i64()), (Some(1), Some(1), Some(8)), "{d}");
        assert_eq!(d["top_level_contents"], json!(["notes"]), "{d}");
        assert_eq!(d["is_empty"], false);
        assert!(d["created_timestamp"].is_number() && d["modified_timestamp"].is_number(), "{d}");
        assert!(d["created_date"].is_string() && d["size_human_readable"] == "8 B", "{d}");
        assert!(d["permissions"].as_str().unwrap().starts_with('d'), "{d}");
        assert!(d["owner"].is_string(), "{d}");
        assert!(d.get("files").is_none(), "detail_level 0 has no files: {d}");

        let (s, d1) = app.call(Method::GET, &format!("{stats}?detail_level=1"), &alice, None).await;
        assert_eq!(s, 200, "{d1}");
        let entries = d1[0]["files"].as_array().unwrap();
        let plan = entries.iter().find(|e| e["path"] == "notes/plan.md").unwrap_or_else(|| panic!("{d1}"));
        assert_eq!((plan["name"].as_str(), plan["size_bytes"].as_i64(), plan["is_directory"].as_bool()), (Some("plan.md"), Some(8), Some(false)), "{plan}");
        assert!(plan["permissions"].as_str().unwrap().starts_with('-'), "{plan}");
        let notes = entries.iter().find(|e| e["path"] == "notes").unwrap_or_else(|| panic!("{d1}"));
        assert_eq!(notes["is_directory"], true);

        let one = format!("/api/v1/chats/{chat}/agent_server_directories/notes/stats?detail_level=1");
        let (s, n) = app.call(Method::GET, &one, &alice, None).await;
        assert_eq!(s, 200, "{n}");
        assert_eq!((n["id"].as_str(), n["file_count"].as_i64()), (Some("notes"), Some(1)), "{n}");
        assert_eq!(n["files"][0]["path"], "plan.md", "{n}");
        let (s, e) = app
            .call(Method::GET, &format!("/api/v1/chats/{chat}/agent_server_directories/nothing/stats"), &alice, None)
            .await;
        assert_error(s, &e, 404);

        let (s, g) = app.call(Method::GET, "/api/v1/agents/directory_stats?offset=0&limit=10", &alice, None).await;
        assert_eq!(s, 200, "{g}");
        assert_eq!(g.as_array().unwrap().len(), 1, "{g}");
        assert_eq!(g[0]["agent_chat_session_id"], chat.as_str(), "{g}");
        assert!(g[0]["chat_preview"].is_string(), "{g}");
        assert_eq!(g[0]["stats"][0]["file_count"], 1, "{g}");
        let (s, g) = app.call(Method::GET, "/api/v1/agents/directory_stats?offset=1", &alice, None).await;
        assert_eq!((s, g), (200, json!([])));
        let (s, g) = app.call(Method::GET, "/api/v1/agents/directory_stats", &bob, None).await;
        assert_eq!((s, g), (200, json!([])), "bob has no sessions with files");

        // Another user's session is not found, whatever the route.
        for (m, p) in [(Method::GET, &files), (Method::DELETE, &files), (Method::GET, &stats), (Method::GET, &one)] {
            let (s, e) = app.call(m, p, &bob, None).await;
            assert_error(s, &e, 404);
        }

        let (s, _) = app.call(Method::DELETE, &files, &alice, None).await;
        assert_eq!(s, 204);
        let (s, body) = app.call(Method::GET, &files, &alice, None).await;
        assert_eq!((s, body), (200, json!([])));
        let (_, d) = app.call(Method::GET, &stats, &alice, None).await;
        assert_eq!(d[0]["is_empty"], true, "{d}");
    }
}
