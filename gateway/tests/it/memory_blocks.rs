//! Memory blocks end to end: defaults, limits and name conflicts, the list's filters, and
//! what user, group and public shares let the other users do.

use reqwest::Method;
use serde_json::{Value, json};

use std::time::Duration;

use docchat_common::testing::ScriptedHttp;

use crate::completions::{app_with, session, upstream};
use crate::custom_agents::grant;
use crate::harness::{ADMIN_KEY, Stack, assert_error};

const EDIT: &str = "svc/memory_block/edit";

/// A user in `groups` with an API key: (user id, key).
async fn member(app: &Stack, username: &str, groups: &[&str]) -> (String, String) {
    let (s, user) = app
        .call(
            Method::POST,
            "/api/v1/admin/users",
            ADMIN_KEY,
            Some(json!({
                "username": username,
                "email": format!("{username}@example.com"),
                "groups": groups,
            })),
        )
        .await;
    assert_eq!(s, 201, "{user}");
    let id = user["id"].as_str().unwrap().to_owned();
    let (s, key) = app
        .call(
            Method::POST,
            "/api/v1/admin/api_keys",
            ADMIN_KEY,
            Some(json!({"user_id": id, "name": "k"})),
        )
        .await;
    assert_eq!(s, 201, "{key}");
    (id, key["secret_key"].as_str().unwrap().to_owned())
}

async fn create(app: &Stack, key: &str, body: Value) -> Value {
    let (s, b) = app
        .call(Method::POST, "/api/v1/memory_blocks", key, Some(body))
        .await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn get(app: &Stack, key: &str, id: &str) -> (u16, Value) {
    app.call(
        Method::GET,
        &format!("/api/v1/memory_blocks/{id}"),
        key,
        None,
    )
    .await
}

/// The names of a list answer, in order.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect()
}

async fn list(app: &Stack, key: &str, query: &str) -> Value {
    let (s, b) = app
        .call(
            Method::GET,
            &format!("/api/v1/memory_blocks{query}"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{query}: {b}");
    b
}

/// PUT of a body on `path`; the status.
async fn put(app: &Stack, key: &str, path: &str, body: Value) -> (u16, Value) {
    app.call(Method::PUT, path, key, Some(body)).await
}

/// The messages the scripted model was last sent.
fn last_sent(model: &ScriptedHttp) -> Vec<Value> {
    let sent: Value = serde_json::from_slice(&model.seen().last().unwrap().body).unwrap();
    sent["messages"].as_array().unwrap().clone()
}

/// Asks `message` in `chat` with `llm_args`, not streamed: (status, answer).
async fn ask(app: &Stack, key: &str, chat: &str, llm_args: Value) -> (u16, Value) {
    app.call(
        Method::POST,
        &format!("/api/v1/chats/{chat}/completions"),
        key,
        Some(json!({"message": "What do I like?", "stream": false, "llm_args": llm_args})),
    )
    .await
}

docchat_common::backend_tests! {
    /// A block named in llm_args (by id or name) or the caller's llm default goes into the
    /// prompt as its injection_mode says, visible in prompt_raw; one the caller cannot read
    /// is 404 until it is shared.
    async fn memory_blocks_are_injected_into_completions(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let prefs = create(&app, &alice, json!({"name": "prefs", "content": "ALICE LIKES TEA", "system_prompt_amendment": "MENTION TEA"})).await;
        let prefs_id = prefs["id"].as_str().unwrap().to_owned();
        create(&app, &alice, json!({"name": "style", "content": "ANSWER IN FRENCH", "injection_mode": "user_instruction"})).await;
        let chat = session(&app, &alice, None).await;

        // By id, system_prompt: a system message ahead of the question, in prompt_raw too.
        let (s, answer) = ask(&app, &alice, &chat, json!({"memory_block_id": prefs_id})).await;
        assert_eq!(s, 200, "{}: {answer}", app.backend);
        let sent = last_sent(&model);
        let system: Vec<&str> = sent.iter().filter(|m| m["role"] == "system").map(|m| m["content"].as_str().unwrap()).collect();
        assert!(system.iter().any(|c| c.contains("ALICE LIKES TEA") && c.contains("MENTION TEA")), "{sent:?}");
        assert_eq!(sent.last().unwrap()["content"], "What do I like?");
        let reply = answer["message_id"].as_str().unwrap();
        let (_, raw) = app
            .call(Method::GET, &format!("/api/v1/messages/{reply}/meta?info_type=prompt_raw"), &alice, None)
            .await;
        assert!(raw[0]["content"].as_str().unwrap().contains("ALICE LIKES TEA"), "{raw}");

        // By name, user_instruction: ahead of the user's message.
        let (s, answer) = ask(&app, &alice, &chat, json!({"memory_block_name": "style"})).await;
        assert_eq!(s, 200, "{answer}");
        let sent = last_sent(&model);
        let question = sent.last().unwrap()["content"].as_str().unwrap().to_owned();
        assert!(question.contains("ANSWER IN FRENCH") && question.ends_with("What do I like?"), "{question}");
        assert!(!sent.iter().any(|m| m["role"] == "system" && m["content"].as_str().unwrap().contains("FRENCH")));

        // Nothing asked, no default: nothing injected. With an llm default: the default.
        let (s, _) = ask(&app, &alice, &chat, json!({})).await;
        assert_eq!(s, 200);
        assert!(!serde_json::to_string(&last_sent(&model)).unwrap().contains("ALICE LIKES TEA"));
        let path = "/api/v1/users/current/default_memory_blocks";
        let (s, _) = put(&app, &alice, path, json!({"scope": "llm", "memory_block_id": prefs_id})).await;
        assert_eq!(s, 200);
        let (s, _) = ask(&app, &alice, &chat, json!({})).await;
        assert_eq!(s, 200);
        assert!(serde_json::to_string(&last_sent(&model)).unwrap().contains("ALICE LIKES TEA"));

        // Bob cannot use Alice's block until she shares it.
        let bobs = session(&app, &bob, None).await;
        for args in [json!({"memory_block_id": prefs_id}), json!({"memory_block_name": "prefs"})] {
            let (s, e) = ask(&app, &bob, &bobs, args).await;
            assert_error(s, &e, 404);
        }
        let (s, _) = put(&app, &alice, &format!("/api/v1/memory_blocks/{prefs_id}/permissions/bob"), json!({})).await;
        assert_eq!(s, 204);
        let (s, e) = ask(&app, &bob, &bobs, json!({"memory_block_name": "prefs"})).await;
        assert_eq!(s, 200, "{e}");
        assert!(serde_json::to_string(&last_sent(&model)).unwrap().contains("ALICE LIKES TEA"));
    }

    /// Agent runs take the block named in llm_args or the caller's `agent` default (not the
    /// `llm` one): system_prompt into the run's system prompt, user_instruction ahead of the
    /// question.
    async fn memory_blocks_reach_agent_runs(backend) {
        let model = crate::agent::agent_upstream(vec![docchat_common::testing::ScriptedTurn::text("Tea.")]).await;
        let app = crate::agent::app_with_agent(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let prefs = create(&app, &alice, json!({"name": "prefs", "content": "ALICE LIKES TEA"})).await;
        let prefs_id = prefs["id"].as_str().unwrap().to_owned();
        create(&app, &alice, json!({"name": "style", "content": "ANSWER IN FRENCH", "injection_mode": "user_instruction"})).await;
        let chat = session(&app, &alice, None).await;
        let agent = |extra: Value| {
            let mut args = json!({"use_agent": true});
            args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!({"message": "What do I like?", "stream": false, "llm_args": args,
                   "rag_config": {"rag_type": "agent_only"}})
        };
        let run = |body: Value| {
            let (app, alice, chat) = (&app, &alice, &chat);
            async move {
                app.call(Method::POST, &format!("/api/v1/chats/{chat}/completions"), alice, Some(body)).await
            }
        };
        let sent = || serde_json::to_string(&last_sent(&model)).unwrap();

        let (s, a) = run(agent(json!({"memory_block_id": prefs_id}))).await;
        assert_eq!(s, 200, "{a}");
        let msgs = last_sent(&model);
        assert!(msgs.iter().any(|m| m["role"] == "system" && m["content"].as_str().unwrap().contains("ALICE LIKES TEA")), "{msgs:?}");

        let (s, a) = run(agent(json!({"memory_block_name": "style"}))).await;
        assert_eq!(s, 200, "{a}");
        let msgs = last_sent(&model);
        let question = msgs.last().unwrap()["content"].as_str().unwrap().to_owned();
        assert!(question.contains("ANSWER IN FRENCH") && question.ends_with("What do I like?"), "{question}");

        // The llm default is not the agent's; the agent default is.
        let path = "/api/v1/users/current/default_memory_blocks";
        let (s, _) = put(&app, &alice, path, json!({"scope": "llm", "memory_block_id": prefs_id})).await;
        assert_eq!(s, 200);
        let (s, _) = run(agent(json!({}))).await;
        assert_eq!(s, 200);
        assert!(!sent().contains("ALICE LIKES TEA"), "the llm default reached an agent run");
        let (s, _) = put(&app, &alice, path, json!({"scope": "agent", "memory_block_id": prefs_id})).await;
        assert_eq!(s, 200);
        let (s, _) = run(agent(json!({}))).await;
        assert_eq!(s, 200);
        assert!(sent().contains("ALICE LIKES TEA"), "the agent default did not reach the run");
        app.stop().await;
    }

    /// Create with its defaults, 409 on a duplicate name (another user may reuse it), the
    /// content limit on create and update, partial PUT, list filters and delete.
    async fn memory_blocks_crud(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;

        let b = create(&app, &alice, json!({"name": "notes"})).await;
        let id = b["id"].as_str().unwrap().to_owned();
        for (field, want) in [
            ("content", json!("")),
            ("system_prompt_amendment", json!("")),
            ("injection_mode", json!("system_prompt")),
            ("access_mode", json!("read_write")),
            ("max_content_length", json!(10000)),
            ("user_id", json!(alice_id)),
            ("username", json!("alice")),
            ("is_public", json!(false)),
            ("is_owner", json!(true)),
            ("is_auto", json!(false)),
            ("user_count", json!(0)),
            ("group_count", json!(0)),
        ] {
            assert_eq!(b[field], want, "{}: {field} in {b}", app.backend);
        }
        for field in ["created_at", "updated_at"] {
            assert!(b[field].is_string(), "{field}: {b}");
        }

        // Names are unique per user.
        let (s, e) = app
            .call(Method::POST, "/api/v1/memory_blocks", &alice, Some(json!({"name": "notes"})))
            .await;
        assert_error(s, &e, 409);
        create(&app, &bob, json!({"name": "notes"})).await;

        // The content limit: 10000 by default, the block's own, 0 unlimited.
        let (s, e) = app
            .call(
                Method::POST,
                "/api/v1/memory_blocks",
                &alice,
                Some(json!({"name": "big", "content": "x".repeat(10_001)})),
            )
            .await;
        assert_error(s, &e, 400);
        create(&app, &alice, json!({"name": "huge", "content": "x".repeat(10_001), "max_content_length": 0})).await;
        let small = create(
            &app,
            &alice,
            json!({"name": "small", "content": "ab", "max_content_length": 3, "injection_mode": "user_instruction"}),
        )
        .await;
        let small_id = small["id"].as_str().unwrap();
        let path = format!("/api/v1/memory_blocks/{small_id}");
        let (s, e) = put(&app, &alice, &path, json!({"content": "abcd"})).await;
        assert_error(s, &e, 400);
        let (s, e) = put(&app, &alice, &path, json!({"injection_mode": "nowhere"})).await;
        assert_error(s, &e, 400);
        let (s, e) = put(&app, &alice, &path, json!({"name": "notes"})).await;
        assert_error(s, &e, 409);

        // PUT changes only what is sent.
        let (s, b) = put(&app, &alice, &path, json!({"content": "abc", "system_prompt_amendment": "be brief"})).await;
        assert_eq!((s, b), (204, Value::Null));
        let (s, b) = get(&app, &alice, small_id).await;
        assert_eq!(s, 200);
        assert_eq!(
            (&b["name"], &b["content"], &b["system_prompt_amendment"], &b["injection_mode"], &b["max_content_length"]),
            (&json!("small"), &json!("abc"), &json!("be brief"), &json!("user_instruction"), &json!(3)),
            "{b}"
        );

        // The list: own blocks only for now, newest change first, filters, paging, total.
        let all = list(&app, &alice, "").await;
        assert_eq!(all["total"], json!(3), "{all}");
        assert_eq!(names(&all), ["small", "huge", "notes"], "{}", app.backend);
        let filtered = list(&app, &alice, "?name_filter=OT").await;
        assert_eq!((names(&filtered), &filtered["total"]), (vec!["notes"], &json!(1)));
        let none = list(&app, &alice, "?name_filter=%25").await;
        assert_eq!(none["total"], json!(0), "a % matches itself: {none}");
        let paged = list(&app, &alice, "?offset=1&limit=1").await;
        assert_eq!((names(&paged), &paged["total"]), (vec!["huge"], &json!(3)));
        let updated = b["updated_at"].as_str().unwrap();
        let t = chrono::DateTime::parse_from_rfc3339(updated).unwrap() - chrono::Duration::seconds(1);
        // The client's form: microseconds and a +0000 offset, `+` escaped.
        let after = t.format("%Y-%m-%dT%H:%M:%S%.6f%%2B0000").to_string();
        let recent = list(&app, &alice, &format!("?updated_after={after}")).await;
        assert!(names(&recent).contains(&"small"), "{recent}");
        let future = list(&app, &alice, "?updated_after=2999-01-01T00:00:00Z").await;
        assert_eq!(future["total"], json!(0), "{future}");
        let (s, e) = app
            .call(Method::GET, "/api/v1/memory_blocks?updated_after=yesterday", &alice, None)
            .await;
        assert_error(s, &e, 400);

        // Bob cannot see, change or delete Alice's block.
        let (s, e) = get(&app, &bob, &id).await;
        assert_error(s, &e, 404);
        let (s, e) = put(&app, &bob, &format!("/api/v1/memory_blocks/{id}"), json!({"content": "x"})).await;
        assert_error(s, &e, 404);
        let (s, e) = app
            .call(Method::DELETE, &format!("/api/v1/memory_blocks/{id}"), &bob, None)
            .await;
        assert_error(s, &e, 404);

        let (s, _) = app
            .call(Method::DELETE, &format!("/api/v1/memory_blocks/{id}"), &alice, None)
            .await;
        assert_eq!(s, 204);
        let (s, e) = get(&app, &alice, &id).await;
        assert_error(s, &e, 404);
        assert_eq!(list(&app, &alice, "").await["total"], json!(2));
    }

    /// User and group shares (read, read+edit), privacy, public permissions and the counts,
    /// seen from the other users' side.
    async fn memory_blocks_sharing(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        grant(&app, &alice_id, "group_sharers", &["ShareWithGroups"]).await;
        let (_, bob) = app.user("bob").await;
        let (_, carol) = member(&app, "carol", &["team"]).await;
        let (_, dave) = app.user("dave").await;

        let b = create(&app, &alice, json!({"name": "plan", "content": "v1"})).await;
        let id = b["id"].as_str().unwrap().to_owned();
        let block = format!("/api/v1/memory_blocks/{id}");

        // Read share for Bob (no body, null and empty all mean read).
        let (s, e) = put(&app, &alice, &format!("{block}/permissions/nobody"), json!({})).await;
        assert_error(s, &e, 404);
        let (s, e) = put(&app, &alice, &format!("{block}/permissions/bob"), json!({"permissions": ["everything"]})).await;
        assert_error(s, &e, 400);
        // Not with its owner: user_count counts the others.
        let (s, e) = put(&app, &alice, &format!("{block}/permissions/alice"), json!({})).await;
        assert_error(s, &e, 400);
        for body in [json!({}), json!({"permissions": null}), json!({"permissions": []})] {
            let (s, b) = put(&app, &alice, &format!("{block}/permissions/bob"), body).await;
            assert_eq!(s, 204, "{b}");
        }
        let (s, b) = get(&app, &bob, &id).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!((&b["is_owner"], &b["content"], &b["user_count"]), (&json!(false), &json!("v1"), &json!(1)));
        assert_eq!(names(&list(&app, &bob, "").await), ["plan"]);
        // Read, not edit: a write is refused (403), and owner-only calls too.
        let (s, e) = put(&app, &bob, &block, json!({"content": "bob"})).await;
        assert_error(s, &e, 403);
        let (s, e) = app.call(Method::DELETE, &block, &bob, None).await;
        assert_error(s, &e, 403);
        let (s, e) = put(&app, &bob, &format!("{block}/permissions/dave"), json!({})).await;
        assert_error(s, &e, 403);
        let (s, e) = put(&app, &bob, &format!("{block}/privacy"), json!({"is_public": true})).await;
        assert_error(s, &e, 403);
        // Dave sees nothing.
        let (s, e) = get(&app, &dave, &id).await;
        assert_error(s, &e, 404);
        assert_eq!(list(&app, &dave, "").await["total"], json!(0));

        // Edit share: Bob may change the content.
        let (s, _) = put(&app, &alice, &format!("{block}/permissions/bob"), json!({"permissions": [EDIT]})).await;
        assert_eq!(s, 204);
        let (s, b) = put(&app, &bob, &block, json!({"content": "v2 by bob"})).await;
        assert_eq!(s, 204, "{b}");
        assert_eq!(get(&app, &alice, &id).await.1["content"], json!("v2 by bob"));
        let (s, perms) = app.call(Method::GET, &format!("{block}/permissions"), &alice, None).await;
        assert_eq!((s, perms), (200, json!([{"username": "bob", "permissions": [EDIT]}])));

        // Group share: Bob lacks the permission to share with groups (401); Alice has it.
        let (s, e) = put(&app, &bob, &format!("{block}/group_permissions/team"), json!({})).await;
        assert_error(s, &e, 401);
        let (s, e) = get(&app, &carol, &id).await;
        assert_error(s, &e, 404);
        let (s, b) = put(&app, &alice, &format!("{block}/group_permissions/team"), json!({})).await;
        assert_eq!(s, 204, "{b}");
        let (s, b) = get(&app, &carol, &id).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!((&b["user_count"], &b["group_count"]), (&json!(1), &json!(1)));
        let (s, e) = put(&app, &carol, &block, json!({"content": "carol"})).await;
        assert_error(s, &e, 403);
        let (s, perms) = app.call(Method::GET, &format!("{block}/group_permissions"), &alice, None).await;
        assert_eq!((s, perms), (200, json!([{"group_id": "team", "permissions": []}])));

        // Public read-only, then public edit; Dave sees it, the counts stay true.
        let (s, pp) = app.call(Method::GET, &format!("{block}/public_permissions"), &alice, None).await;
        assert_eq!((s, pp), (200, json!([])));
        let (s, _) = put(&app, &alice, &format!("{block}/privacy"), json!({"is_public": true, "permissions": []})).await;
        assert_eq!(s, 204);
        let (s, b) = get(&app, &dave, &id).await;
        assert_eq!((s, &b["is_public"]), (200, &json!(true)), "{b}");
        let (s, e) = put(&app, &dave, &block, json!({"content": "dave"})).await;
        assert_error(s, &e, 403);
        assert_eq!(names(&list(&app, &dave, "").await), ["plan"]);
        let (_, pp) = app.call(Method::GET, &format!("{block}/public_permissions"), &dave, None).await;
        assert_eq!(pp, json!([]));
        let (s, _) = put(&app, &alice, &format!("{block}/privacy"), json!({"is_public": true})).await;
        assert_eq!(s, 204);
        let (_, pp) = app.call(Method::GET, &format!("{block}/public_permissions"), &dave, None).await;
        assert_eq!(pp, json!([EDIT]));
        let (s, b) = put(&app, &dave, &block, json!({"content": "v3 by dave"})).await;
        assert_eq!(s, 204, "{b}");

        // Private again: Dave loses it, Bob's and the team's shares stay.
        let (s, _) = put(&app, &alice, &format!("{block}/privacy"), json!({"is_public": false})).await;
        assert_eq!(s, 204);
        let (s, e) = get(&app, &dave, &id).await;
        assert_error(s, &e, 404);
        let (_, pp) = app.call(Method::GET, &format!("{block}/public_permissions"), &alice, None).await;
        assert_eq!(pp, json!([]));
        assert_eq!(get(&app, &bob, &id).await.0, 200);
        let (s, b) = get(&app, &carol, &id).await;
        assert_eq!((s, &b["content"], &b["is_public"]), (200, &json!("v3 by dave"), &json!(false)));
        // Never 404: an unknown id has no public permissions.
        let (s, pp) = app
            .call(Method::GET, "/api/v1/memory_blocks/00000000-0000-0000-0000-000000000000/public_permissions", &dave, None)
            .await;
        assert_eq!((s, pp), (200, json!([])));

        // Unsharing takes access away.
        let (s, _) = app.call(Method::DELETE, &format!("{block}/permissions/bob"), &alice, None).await;
        assert_eq!(s, 204);
        let (s, e) = get(&app, &bob, &id).await;
        assert_error(s, &e, 404);
        let (s, _) = app.call(Method::DELETE, &format!("{block}/group_permissions/team"), &alice, None).await;
        assert_eq!(s, 204);
        let (s, e) = get(&app, &carol, &id).await;
        assert_error(s, &e, 404);
        let (s, b) = get(&app, &alice, &id).await;
        assert_eq!((s, &b["user_count"], &b["group_count"]), (200, &json!(0), &json!(0)));
    }

    /// One default per scope: set, replace, clear; a block the caller cannot read is 404.
    async fn memory_block_defaults(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let a = create(&app, &alice, json!({"name": "a"})).await;
        let b = create(&app, &alice, json!({"name": "b"})).await;
        let theirs = create(&app, &bob, json!({"name": "bob's"})).await;
        let path = "/api/v1/users/current/default_memory_blocks";

        let (s, d) = app.call(Method::GET, path, &alice, None).await;
        assert_eq!((s, d), (200, json!({"defaults": {"llm": null, "agent": null}})));
        let (s, r) = put(&app, &alice, path, json!({"scope": "llm", "memory_block_id": a["id"]})).await;
        assert_eq!((s, &r["scope"], &r["memory_block"]["name"]), (200, &json!("llm"), &json!("a")), "{r}");
        let (s, _) = put(&app, &alice, path, json!({"scope": "agent", "memory_block_id": a["id"]})).await;
        assert_eq!(s, 200);
        let (s, _) = put(&app, &alice, path, json!({"scope": "llm", "memory_block_id": b["id"]})).await;
        assert_eq!(s, 200);
        let (_, d) = app.call(Method::GET, path, &alice, None).await;
        assert_eq!((&d["defaults"]["llm"]["name"], &d["defaults"]["agent"]["name"]), (&json!("b"), &json!("a")), "{d}");

        let (s, e) = put(&app, &alice, path, json!({"scope": "llm", "memory_block_id": theirs["id"]})).await;
        assert_error(s, &e, 404);
        let (s, e) = put(&app, &alice, path, json!({"scope": "robot", "memory_block_id": a["id"]})).await;
        assert_error(s, &e, 400);

        let (s, r) = put(&app, &alice, path, json!({"scope": "agent", "memory_block_id": null})).await;
        assert_eq!((s, r), (200, json!({"scope": "agent", "memory_block": null})));
        let (s, _) = put(&app, &alice, path, json!({"scope": "llm"})).await;
        assert_eq!(s, 200);
        let (_, d) = app.call(Method::GET, path, &alice, None).await;
        assert_eq!(d, json!({"defaults": {"llm": null, "agent": null}}));
        // Bob's defaults are his own.
        let (_, d) = app.call(Method::GET, path, &bob, None).await;
        assert_eq!(d, json!({"defaults": {"llm": null, "agent": null}}));
    }
}
