//! Limits on model calls through the REST API: the cost caps (the ledger fed by
//! `usage.llm`, a refusal once a cap is reached, lifted when an administrator raises it),
//! the hard cap chat_max_concurrent_per_user, and the chat rate limit of fairness.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{ANSWER, app_with, session, stream, upstream};
use crate::harness::{ADMIN_KEY, Stack, assert_error, configure, eventually};

async fn ask(app: &Stack, key: &str, chat: &str, message: &str) -> (u16, Value) {
    app.call(
        Method::POST,
        &format!("/api/v1/chats/{chat}/completions"),
        key,
        Some(json!({"message": message, "stream": false})),
    )
    .await
}

docchat_common::backend_tests! {
    async fn cost_caps_refuse_once_reached_until_an_administrator_raises_them(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        // Settings reach the services at once (no cache), so the test sees edits directly.
        configure(&app, "/api/v1/configurations/config_cache_ttl_seconds", "0").await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;

        // One answer: 42 prompt tokens at 1.0 and 20 completion tokens at 2.0 per million.
        let one = (42.0 * 1.0 + 20.0 * 2.0) / 1e6;
        configure(
            &app,
            &format!("/api/v1/users/{alice_id}/configurations/max_llm_cost_per_user_per_24h"),
            &format!("{}", one * 1.5),
        )
        .await;
        let (s, b) = ask(&app, &alice, &chat, "first").await;
        assert_eq!(s, 200, "{}: {b}", backend.name);
        let (s, b) = ask(&app, &alice, &chat, "second").await;
        assert_eq!(s, 200, "under the cap until the ledger has both: {b}");

        // Once the ledger has booked both answers, the 24-hour cap is reached.
        let refused = || async {
            let (s, _) = ask(&app, &alice, &chat, "third").await;
            s == 429
        };
        eventually("the 24-hour cap refuses", refused).await;
        let seen = model.seen().len();
        let (s, b) = ask(&app, &alice, &chat, "fourth").await;
        assert_error(s, &b, 429);
        let message = b["message"].as_str().unwrap();
        assert!(
            message.contains("max_llm_cost_per_user_per_24h") && message.contains("USD"),
            "{message}"
        );
        assert_eq!(model.seen().len(), seen, "a refused request calls no model");
        // Suggested questions are model calls too.
        let (s, b) = app
            .call(
                Method::GET,
                &format!("/api/v1/chats/{chat}/questions?limit=2"),
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 429);

        // Another user is not limited by alice's spend.
        let bobs = session(&app, &bob, None).await;
        let (s, b) = ask(&app, &bob, &bobs, "hello").await;
        assert_eq!(s, 200, "{b}");

        // The administrator raises the cap: accepted again.
        configure(
            &app,
            &format!("/api/v1/users/{alice_id}/configurations/max_llm_cost_per_user_per_24h"),
            "-1",
        )
        .await;
        let (s, b) = ask(&app, &alice, &chat, "fifth").await;
        assert_eq!(s, 200, "{b}");

        // The lifetime cap counts every call, the suggested questions included.
        configure(
            &app,
            &format!("/api/v1/users/{alice_id}/configurations/max_llm_cost_per_user"),
            &format!("{}", one * 3.0),
        )
        .await;
        let refused = || async {
            let (s, b) = ask(&app, &alice, &chat, "sixth").await;
            s == 429
                && b["message"]
                    .as_str()
                    .unwrap()
                    .contains("max_llm_cost_per_user ")
        };
        eventually("the lifetime cap refuses", refused).await;

        // A guest has its own cap.
        let (guest_id, guest) = app.user("visitor").await;
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/roles",
                ADMIN_KEY,
                Some(json!({"name": "guest", "description": "guests"})),
            )
            .await;
        assert!(s == 200 || s == 201, "{b}");
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/users/{guest_id}/roles/guest"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert!(s == 200 || s == 204, "{b}");
        configure(&app, "/api/v1/configurations/max_llm_cost_per_guest", "0").await;
        let guests = session(&app, &guest, None).await;
        let (s, b) = ask(&app, &guest, &guests, "hi").await;
        assert_error(s, &b, 429);
        assert!(
            b["message"]
                .as_str()
                .unwrap()
                .contains("max_llm_cost_per_guest"),
            "{b}"
        );
        let (s, b) = ask(&app, &bob, &bobs, "not a guest").await;
        assert_eq!(s, 200, "{b}");
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn the_concurrency_cap_holds_while_a_reply_streams(backend) {
        // Slow enough that the first reply is still streaming while the second is asked.
        let model = upstream(Duration::from_millis(40)).await;
        let app = app_with(&backend, &model).await;
        configure(&app, "/api/v1/configurations/config_cache_ttl_seconds", "0").await;
        let (alice_id, alice) = app.user("alice").await;
        configure(
            &app,
            &format!("/api/v1/users/{alice_id}/configurations/chat_max_concurrent_per_user"),
            "1",
        )
        .await;
        let chat = session(&app, &alice, None).await;
        let other = session(&app, &alice, None).await;

        let mut first = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "slow one", "stream": true}),
        )
        .await;
        let head = first.next(Duration::from_secs(10)).await.unwrap();
        assert!(head["question_id"].is_string(), "{head}");
        let (s, b) = ask(&app, &alice, &other, "meanwhile").await;
        assert_error(s, &b, 429);
        assert!(
            b["message"]
                .as_str()
                .unwrap()
                .contains("chat_max_concurrent_per_user"),
            "{b}"
        );
        // Drain the first reply; then the slot is free again.
        let (body, _) = first.rest(Duration::from_secs(10)).await;
        assert_eq!(body, ANSWER);
        let (s, b) = ask(&app, &alice, &other, "after").await;
        assert_eq!(s, 200, "{}: {b}", backend.name);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn a_session_deleted_while_its_reply_streams_frees_the_slot_and_books_the_cost(backend) {
        let model = upstream(Duration::from_millis(40)).await;
        let app = app_with(&backend, &model).await;
        configure(&app, "/api/v1/configurations/config_cache_ttl_seconds", "0").await;
        let (alice_id, alice) = app.user("alice").await;
        let user_setting = |name: &str| format!("/api/v1/users/{alice_id}/configurations/{name}");
        configure(&app, &user_setting("chat_max_concurrent_per_user"), "1").await;
        let doomed = session(&app, &alice, None).await;
        let other = session(&app, &alice, None).await;

        let mut lines = stream(
            &app,
            &alice,
            &doomed,
            json!({"message": "slow one", "stream": true}),
        )
        .await;
        let head = lines.next(Duration::from_secs(10)).await.unwrap();
        assert!(head["question_id"].is_string(), "{head}");
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/chats/{doomed}"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200, "{b}");

        // The reply has nowhere to go: the stream ends with an error line, no message id.
        let (_, last) = lines.rest(Duration::from_secs(10)).await;
        let error = last["error"].as_str().unwrap_or_default();
        assert!(error.contains("deleted"), "{}: {last}", backend.name);
        assert!(last["message_id"].is_null(), "{last}");

        // Its concurrency slot is free at once.
        let (s, b) = ask(&app, &alice, &other, "after").await;
        assert_eq!(s, 200, "{}: {b}", backend.name);

        // Both answers were booked. A long reply holds the only slot, so a probe is refused
        // without calling the model: for cost once the ledger has both answers (a cap of one
        // and a half), for concurrency while it has only one.
        let third = session(&app, &alice, None).await;
        let mut holder = stream(
            &app,
            &alice,
            &third,
            json!({"message": "LONG one", "stream": true}),
        )
        .await;
        assert!(holder.next(Duration::from_secs(10)).await.is_some());
        let one = (42.0 * 1.0 + 20.0 * 2.0) / 1e6;
        configure(
            &app,
            &user_setting("max_llm_cost_per_user_per_24h"),
            &format!("{}", one * 1.5),
        )
        .await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
        loop {
            let (s, b) = ask(&app, &alice, &other, "probe").await;
            assert_error(s, &b, 429);
            if b["message"]
                .as_str()
                .unwrap()
                .contains("max_llm_cost_per_user_per_24h")
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: the deleted session's answer was never booked",
                backend.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(holder);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn the_chat_rate_limit_answers_429_when_fairness_is_on(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = Stack::builder(&backend)
            .everything()
            .scripted_model(&model.base_url)
            .configure(|c| {
                c.chat_fairness_enabled = true;
                c.chat_rate_limit_per_minute = 3;
            })
            .start()
            .await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        for i in 0..3 {
            let (s, b) = ask(&app, &alice, &chat, &format!("question {i}")).await;
            assert_eq!(s, 200, "{}: {b}", backend.name);
        }
        let (s, b) = ask(&app, &alice, &chat, "one too many").await;
        assert_error(s, &b, 429);
        assert!(
            b["message"]
                .as_str()
                .unwrap()
                .contains("3 requests per minute"),
            "{b}"
        );
        let bobs = session(&app, &bob, None).await;
        let (s, b) = ask(&app, &bob, &bobs, "bob is fine").await;
        assert_eq!(s, 200, "{b}");
        app.stop().await;
    }
}
