//! The compatible API (/compat_api/v1) against the scripted upstream: chat completions and
//! responses, plain and streamed as the vendor's Server-Sent Events; the model list; model
//! resolution and the unknown-model error; image, audio and file parts; errors in the
//! vendor's shape; usage booked against the cost caps; the chat rate limit.

use std::time::Duration;

use docchat_common::testing::ScriptedHttp;
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{ANSWER, upstream};
use crate::harness::{ADMIN_KEY, Stack, eventually};

/// Three models: `scripted` (the default, "Scripted One", base `shared-base`), `seer`
/// (vision, base `shared-base`) and `solo` (base `solo-base`).
fn models(base_url: &str) -> String {
    format!(
        r#"
[[models]]
name = "scripted"
display_name = "Scripted One"
base_url = "{base_url}/v1"
base_model = "shared-base"
input_price = 1.0
output_price = 2.0
default = true

[[models]]
name = "seer"
base_url = "{base_url}/v1"
base_model = "shared-base"
vision = true

[[models]]
name = "solo"
base_url = "{base_url}/v1"
upstream_model = "solo-upstream"
base_model = "solo-base"
"#
    )
}

async fn start(
    backend: &docchat_common::testing::Backend,
    model: &ScriptedHttp,
    tweak: impl FnOnce(&mut docchat_common::Config),
) -> Stack {
    Stack::builder(backend)
        .everything()
        .models(&models(&model.base_url))
        .configure(tweak)
        .start()
        .await
}

async fn post(app: &Stack, key: &str, path: &str, body: Value) -> (u16, Value) {
    app.call(
        Method::POST,
        &format!("/compat_api/v1{path}"),
        key,
        Some(body),
    )
    .await
}

/// The events of a whole SSE body: (event name, data).
async fn events(app: &Stack, key: &str, path: &str, body: Value) -> Vec<(String, String)> {
    let response = app
        .http(Method::POST, &format!("/compat_api/v1{path}"), Some(key))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.to_owned();
                }
            }
            (event, data)
        })
        .collect()
}

/// What the upstream was last sent.
fn last_sent(model: &ScriptedHttp) -> Value {
    let seen = model.seen();
    serde_json::from_slice(&seen.last().unwrap().body).unwrap()
}

fn assert_vendor_error(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body}");
    let error = &body["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
}

docchat_common::backend_tests! {
    async fn chat_completions_answer_plain_and_streamed_in_the_vendor_format(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |_| {}).await;
        let (_, key) = app.user("ada").await;

        let (s, b) = post(
            &app,
            &key,
            "/chat/completions",
            json!({
                "model": "scripted",
                "messages": [
                    {"role": "developer", "content": "Be brief."},
                    {"role": "user", "content": "Capital of France?"}
                ],
                "temperature": 0.3,
                "max_tokens": 50,
                "tools": [{"type": "function", "function": {"name": "ignored"}}],
                "n": 1
            }),
        )
        .await;
        assert_eq!(s, 200, "{}: {b}", backend.name);
        assert!(b["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(b["object"], "chat.completion");
        assert!(b["created"].as_i64().unwrap() > 1_700_000_000);
        assert_eq!(b["model"], "scripted");
        assert_eq!(b["choices"][0]["index"], 0);
        assert_eq!(b["choices"][0]["message"]["role"], "assistant");
        assert_eq!(
            b["choices"][0]["message"]["content"],
            "Paris is the French capital."
        );
        assert_eq!(b["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            b["usage"],
            json!({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12})
        );
        let sent = last_sent(&model);
        assert_eq!(
            sent["messages"],
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Capital of France?"}
            ])
        );
        assert_eq!(sent["max_tokens"], 50);
        assert!((sent["temperature"].as_f64().unwrap() - 0.3).abs() < 1e-6);
        assert!(
            sent.get("tools").is_none(),
            "unsupported fields are dropped"
        );

        // Unset limits are left to the model.
        let (s, _) = post(
            &app,
            &key,
            "/chat/completions",
            json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        assert_eq!(s, 200);
        let sent = last_sent(&model);
        assert!(sent.get("max_tokens").is_none() && sent.get("temperature").is_none());

        let events = events(
            &app,
            &key,
            "/chat/completions",
            json!({
                "model": "scripted",
                "messages": [{"role": "user", "content": "Capital of France?"}],
                "stream": true,
                "stream_options": {"include_usage": true}
            }),
        )
        .await;
        let (last, chunks) = events.split_last().unwrap();
        assert_eq!(last.1, "[DONE]");
        let chunks: Vec<Value> = chunks
            .iter()
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect();
        let id = chunks[0]["id"].as_str().unwrap();
        assert!(chunks.iter().all(|c| c["id"] == id
            && c["object"] == "chat.completion.chunk"
            && c["model"] == "scripted"));
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, ANSWER);
        let n = chunks.len();
        assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
        assert_eq!(chunks[n - 1]["choices"], json!([]));
        let words = ANSWER.split(' ').count() as u64;
        assert_eq!(
            chunks[n - 1]["usage"],
            json!({"prompt_tokens": 42, "completion_tokens": words, "total_tokens": 42 + words})
        );

        // Without include_usage there is no usage chunk.
        let events = events_of(&app, &key, "Capital?").await;
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect();
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));

        // An upstream that breaks off mid-stream: an error event in the vendor's shape.
        let events = events_of(&app, &key, "FAIL now").await;
        let (_, data) = events.last().unwrap();
        let error: Value = serde_json::from_str(data).unwrap();
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("broke off")
                || error["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("ended"),
            "{error}"
        );
        app.stop().await;
    }
}

async fn events_of(app: &Stack, key: &str, question: &str) -> Vec<(String, String)> {
    events(
        app,
        key,
        "/chat/completions",
        json!({
            "model": "scripted",
            "messages": [{"role": "user", "content": question}],
            "stream": true
        }),
    )
    .await
}

docchat_common::backend_tests! {
    async fn models_resolve_in_the_spec_order_and_unknown_ones_fail_in_the_vendor_shape(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |_| {}).await;
        let (_, key) = app.user("ada").await;
        let ask = |model: &'static str| {
            let (app, key) = (&app, &key);
            async move {
                post(
                    app,
                    key,
                    "/chat/completions",
                    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
                )
                .await
            }
        };
        for (asked, resolved) in [
            ("auto", "scripted"),
            ("seer", "seer"),
            ("Scripted One", "scripted"),
            ("solo-base", "solo"),
        ] {
            let (s, b) = ask(asked).await;
            assert_eq!(s, 200, "{asked}: {b}");
            assert_eq!(b["model"], resolved, "{asked}");
        }
        assert_eq!(last_sent(&model)["model"], "solo-upstream");
        // Two models share this base model: rejected, as an unknown model is.
        for asked in ["shared-base", "no-such-model", "Scripted one"] {
            let (s, b) = ask(asked).await;
            assert_eq!(s, 404, "{asked}: {b}");
            assert_eq!(b["error"]["type"], "invalid_request_error");
            assert_eq!(b["error"]["param"], "model");
            assert_eq!(b["error"]["code"], "model_not_found");
            assert!(b["error"]["message"].as_str().unwrap().contains(asked));
        }
        // The streamed call fails the same way, before any event.
        let (s, b) = post(
            &app,
            &key,
            "/responses",
            json!({"model": "no-such-model", "input": "hi", "stream": true}),
        )
        .await;
        assert_eq!(s, 404, "{b}");
        assert_eq!(b["error"]["code"], "model_not_found");

        // The list.
        let (s, b) = app
            .call(Method::GET, "/compat_api/v1/models", &key, None)
            .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["object"], "list");
        let ids: Vec<&str> = b["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        // The file's models in order; local models found in the models dir come after them.
        assert_eq!(ids[..3], ["scripted", "seer", "solo"]);
        let solo = &b["data"][2];
        assert_eq!(solo["object"], "model");
        assert_eq!(solo["root"], "solo");
        assert_eq!(solo["parent"], Value::Null);
        assert_eq!(solo["base_model"], "solo-base");
        assert!(solo["owned_by"].is_string() && solo["created"].is_i64());
        let permission = &solo["permission"][0];
        for field in [
            "id",
            "object",
            "created",
            "allow_create_engine",
            "allow_sampling",
            "allow_logprobs",
            "allow_search_indices",
            "allow_view",
            "allow_fine_tuning",
            "organization",
            "group",
            "is_blocking",
        ] {
            assert!(
                permission.get(field).is_some(),
                "permission.{field}: {permission}"
            );
        }
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn images_go_to_vision_models_and_audio_and_files_are_refused(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |_| {}).await;
        let (_, key) = app.user("ada").await;
        let image =
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}});
        let with = |model: &str, part: &Value| json!({"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}]});

        let (s, b) = post(&app, &key, "/chat/completions", with("seer", &image)).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(
            last_sent(&model)["messages"][0]["content"],
            json!([{"type": "text", "text": "What is this?"}, image])
        );

        let calls = model.seen().len();
        let (s, b) = post(&app, &key, "/chat/completions", with("scripted", &image)).await;
        assert_vendor_error(s, &b, 400);
        assert!(
            b["error"]["message"].as_str().unwrap().contains("images"),
            "{b}"
        );
        let audio =
            json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}});
        let (s, b) = post(&app, &key, "/chat/completions", with("seer", &audio)).await;
        assert_vendor_error(s, &b, 400);
        let file = json!({"type": "file", "file": {"file_id": "file-1"}});
        let (s, b) = post(&app, &key, "/chat/completions", with("seer", &file)).await;
        assert_vendor_error(s, &b, 400);
        assert_eq!(model.seen().len(), calls, "refused requests reach no model");

        // Other bad input.
        for body in [
            json!({"model": "scripted"}),
            json!({"model": "scripted", "messages": []}),
            json!({"model": "scripted", "messages": [{"role": "tool", "content": "1"}]}),
            json!({"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "temperature": 7}),
            json!({"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}),
        ] {
            let (s, b) = post(&app, &key, "/chat/completions", body.clone()).await;
            assert_vendor_error(s, &b, 400);
            let _ = body;
        }
        let (s, b) = post(
            &app,
            &key,
            "/responses",
            json!({"model": "seer", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}]}),
        )
        .await;
        assert_vendor_error(s, &b, 400);
        assert_eq!(model.seen().len(), calls);

        // No key, a wrong key: 401 in the vendor's shape.
        let r = app
            .http(Method::GET, "/compat_api/v1/models", None)
            .send()
            .await
            .unwrap();
        let (s, b) = crate::harness::read(r).await;
        assert_vendor_error(s, &b, 401);
        let (s, b) = app
            .call(Method::GET, "/compat_api/v1/models", "sk-wrong", None)
            .await;
        assert_vendor_error(s, &b, 401);
        let (s, b) = app
            .call(Method::GET, "/compat_api/v1/embeddings", &key, None)
            .await;
        assert_vendor_error(s, &b, 404);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn responses_answer_plain_and_streamed_as_the_vendor_event_sequence(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |_| {}).await;
        let (_, key) = app.user("ada").await;

        let (s, b) = post(
            &app,
            &key,
            "/responses",
            json!({"model": "scripted", "input": "Capital of France?", "instructions": "Be brief.", "temperature": 0.2}),
        )
        .await;
        assert_eq!(s, 200, "{}: {b}", backend.name);
        assert!(b["id"].as_str().unwrap().starts_with("resp_"));
        assert_eq!(b["object"], "response");
        assert!(b["created_at"].is_i64());
        assert_eq!(b["model"], "scripted");
        assert_eq!(b["status"], "completed");
        assert_eq!(b["error"], Value::Null);
        let item = &b["output"][0];
        assert_eq!(item["type"], "message");
        assert_eq!(item["role"], "assistant");
        assert_eq!(item["status"], "completed");
        assert!(item["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(
            item["content"],
            json!([{"type": "output_text", "text": "Paris is the French capital.", "annotations": [], "logprobs": []}])
        );
        assert_eq!(b["usage"]["input_tokens"], 7);
        assert_eq!(b["usage"]["output_tokens"], 5);
        assert_eq!(b["usage"]["total_tokens"], 12);
        assert_eq!(
            last_sent(&model)["messages"],
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}])
        );

        // Chat history as role/content items.
        let (s, _) = post(
            &app,
            &key,
            "/responses",
            json!({"model": "scripted", "input": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]}
            ]}),
        )
        .await;
        assert_eq!(s, 200);
        assert_eq!(last_sent(&model)["messages"].as_array().unwrap().len(), 3);

        let events = events(
            &app,
            &key,
            "/responses",
            json!({"model": "scripted", "input": "Capital of France?", "stream": true}),
        )
        .await;
        let data: Vec<Value> = events
            .iter()
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect();
        for ((event, _), d) in events.iter().zip(&data) {
            assert_eq!(
                event,
                d["type"].as_str().unwrap(),
                "event names match types"
            );
        }
        let kinds: Vec<&str> = data.iter().map(|d| d["type"].as_str().unwrap()).collect();
        let deltas = kinds
            .iter()
            .filter(|k| **k == "response.output_text.delta")
            .count();
        assert_eq!(deltas, ANSWER.split(' ').count());
        let mut expected = vec![
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
        ];
        expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
        expected.extend([
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]);
        assert_eq!(kinds, expected);
        for (i, d) in data.iter().enumerate() {
            assert_eq!(d["sequence_number"], i as u64);
        }
        assert_eq!(data[0]["response"]["status"], "in_progress");
        let text: String = data.iter().filter_map(|d| d["delta"].as_str()).collect();
        assert_eq!(text, ANSWER);
        let done = &data.last().unwrap()["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["content"][0]["text"], ANSWER);
        assert_eq!(done["usage"]["input_tokens"], 42);
        assert_eq!(done["id"], data[0]["response"]["id"]);
        app.stop().await;
    }
}

async fn ask(app: &Stack, key: &str) -> (u16, Value) {
    post(
        app,
        key,
        "/chat/completions",
        json!({"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
}

docchat_common::backend_tests! {
    async fn compat_usage_is_booked_against_the_cost_caps(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |_| {}).await;
        let (s, b) = app
            .call(
                Method::PUT,
                "/api/v1/configurations/config_cache_ttl_seconds",
                ADMIN_KEY,
                Some(json!({"string_value": "0"})),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        let (ada_id, ada) = app.user("ada").await;
        let (_, bob) = app.user("bob").await;
        // One plain answer: 7 prompt tokens at 1.0 and 5 completion tokens at 2.0 per million.
        let one = (7.0 + 5.0 * 2.0) / 1e6;
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/users/{ada_id}/configurations/max_llm_cost_per_user"),
                ADMIN_KEY,
                Some(json!({"string_value": format!("{}", one * 1.5)})),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(ask(&app, &ada).await.0, 200);
        assert_eq!(ask(&app, &ada).await.0, 200);
        // Booked within about a second; then the lifetime cap refuses.
        eventually("the cost cap refuses compat calls", || async {
            ask(&app, &ada).await.0 == 429
        })
        .await;
        let calls = model.seen().len();
        let (s, b) = ask(&app, &ada).await;
        assert_vendor_error(s, &b, 429);
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_llm_cost_per_user"),
            "{b}"
        );
        assert_eq!(model.seen().len(), calls, "a refused call reaches no model");
        assert_eq!(ask(&app, &bob).await.0, 200, "other users are not capped");
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn the_chat_rate_limit_applies_to_compat_calls(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = start(&backend, &model, |c| {
            c.chat_fairness_enabled = true;
            c.chat_rate_limit_per_minute = 8;
        })
        .await;
        let (_, ada) = app.user("ada").await;
        let (_, bob) = app.user("bob").await;
        for _ in 0..8 {
            assert_eq!(ask(&app, &ada).await.0, 200);
        }
        let (s, b) = ask(&app, &ada).await;
        assert_vendor_error(s, &b, 429);
        assert_eq!(b["error"]["type"], "rate_limit_error");
        assert_eq!(ask(&app, &bob).await.0, 200, "the limit is per user");
        app.stop().await;
    }
}

/// The events of `GET path` (a background response's stream).
async fn events_get(app: &Stack, key: &str, path: &str) -> Vec<(String, Value)> {
    let response = app
        .http(Method::GET, &format!("/compat_api/v1{path}"), Some(key))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let event = block
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default();
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_default();
            (event.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

docchat_common::backend_tests! {
    async fn background_responses_are_read_resumed_and_cancelled_by_their_owner_only(backend) {
        let model = upstream(Duration::from_millis(20)).await;
        let app = start(&backend, &model, |_| {}).await;
        let (_, key) = app.user("ada").await;
        let (_, other) = app.user("eve").await;

        let (s, created) = post(&app, &key, "/responses", json!({"model": "scripted", "input": "Capital?", "background": true, "metadata": {"k": "v"}})).await;
        assert_eq!(s, 200, "{}: {created}", backend.name);
        assert!(matches!(created["status"].as_str(), Some("queued" | "in_progress")), "{created}");
        assert_eq!(created["metadata"], json!({"k": "v"}));
        let id = created["id"].as_str().unwrap().to_owned();

        // Eve sees none of it; bad queries are the vendor's 400.
        let (s, b) = app.call(Method::GET, &format!("/compat_api/v1/responses/{id}"), &other, None).await;
        assert_vendor_error(s, &b, 404);
        let (s, b) = post(&app, &other, &format!("/responses/{id}/cancel"), json!({})).await;
        assert_vendor_error(s, &b, 404);
        for query in ["?stream=maybe", "?starting_after=2"] {
            let (s, b) = app.call(Method::GET, &format!("/compat_api/v1/responses/{id}{query}"), &key, None).await;
            assert_vendor_error(s, &b, 400);
        }

        // The whole stream, numbered from 0; then resumed after any event.
        let all = events_get(&app, &key, &format!("/responses/{id}?stream=true")).await;
        let numbers: Vec<u64> = all.iter().map(|(_, d)| d["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(numbers, (0..all.len() as u64).collect::<Vec<_>>(), "{}", backend.name);
        assert_eq!(all[0].0, "response.created");
        assert_eq!(all[0].1["response"]["status"], "queued");
        assert_eq!(all.last().unwrap().0, "response.completed");
        let text: String = all
            .iter()
            .filter(|(e, _)| e == "response.output_text.delta")
            .map(|(_, d)| d["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, ANSWER, "{}", backend.name);
        for after in [0, 5, all.len() as u64 - 3] {
            let resumed = events_get(&app, &key, &format!("/responses/{id}?stream=true&starting_after={after}")).await;
            assert_eq!(resumed, all[after as usize + 1..], "{}: after {after}", backend.name);
        }
        let (s, done) = app.call(Method::GET, &format!("/compat_api/v1/responses/{id}"), &key, None).await;
        assert_eq!(s, 200);
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["content"][0]["text"], ANSWER);
        assert_eq!(done["usage"]["output_tokens"], ANSWER.split_inclusive(' ').count());
        assert_eq!(done["metadata"], json!({"k": "v"}));

        // A long one, cancelled: its text so far kept.
        let (_, long) = post(&app, &key, "/responses", json!({"model": "scripted", "input": "LONG", "background": true})).await;
        let long = long["id"].as_str().unwrap().to_owned();
        let (s, cancelled) = post(&app, &key, &format!("/responses/{long}/cancel"), json!({})).await;
        assert_eq!((s, cancelled["status"].as_str()), (200, Some("cancelled")), "{}: {cancelled}", backend.name);
        let ended = events_get(&app, &key, &format!("/responses/{long}?stream=true&starting_after=3")).await;
        let (last, data) = ended.last().unwrap();
        assert_eq!((last.as_str(), data["response"]["status"].as_str()), ("response.failed", Some("cancelled")));

        // Background and streamed: the events from its creation.
        let response = app
            .http(Method::POST, "/compat_api/v1/responses", Some(&key))
            .json(&json!({"model": "scripted", "input": "Capital?", "background": true, "stream": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.text().await.unwrap();
        assert!(body.starts_with("event: response.created\n"), "{body}");
        assert!(body.contains("event: response.completed\n"), "{body}");
        app.stop().await;
    }
}
