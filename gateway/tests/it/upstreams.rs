//! Upstreams named in the environment, without a models file (`OPENAI_BASE_URL` /
//! `OPENAI_API_KEY`, `OLLAMA_BASE_URL`): their models are listed from the upstream's
//! `GET /v1/models` at start and at every refresh, offered under their own ids, `auto` goes
//! to the first, calls carry the key; the models file wins a shared name; an upstream that
//! does not answer is a degraded readiness entry, not a failed start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use reqwest::Method;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::harness::{ADMIN_KEY, Stack, eventually, read};

const KEY: &str = "sk-upstream-test-5521";

/// An OpenAI-compatible upstream (a vLLM, say) that lists `models` (changeable while it
/// runs) with an embedder among them, and answers every chat completion with "Paris.".
async fn listing_upstream(models: Arc<Mutex<Vec<Value>>>) -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(move |r: &SeenRequest| {
        let json_body = |v: Value| Streamed {
            status: 200,
            content_type: "application/json".into(),
            parts: vec![(Duration::ZERO, v.to_string().into_bytes())],
        };
        if r.method == "GET" && r.path == "/v1/models" {
            let data = models.lock().unwrap().clone();
            return json_body(json!({"object": "list", "data": data}));
        }
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        if body["stream"] == json!(true) {
            let chunk = json!({"choices": [{"delta": {"content": format!("Paris ({model}).")}}]});
            let usage =
                json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}});
            return Streamed {
                status: 200,
                content_type: "text/event-stream".into(),
                parts: vec![(
                    Duration::ZERO,
                    format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n").into_bytes(),
                )],
            };
        }
        json_body(json!({
            "choices": [{"message": {"role": "assistant", "content": format!("Paris ({model}).")}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3}
        }))
    }))
    .await
}

/// The chat models docchat offers but the local ones: (id, context_length, is_default).
async fn models(app: &Stack) -> Vec<(String, u64, bool)> {
    let (s, list) = app
        .call(Method::GET, "/api/v1/models", ADMIN_KEY, None)
        .await;
    assert_eq!(s, 200, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_owned(),
                m["context_length"].as_u64().unwrap_or_default(),
                m["is_default"].as_bool().unwrap_or_default(),
            )
        })
        // The local GGUF models of the test models dir come after the upstreams' (and are
        // the local suites' business).
        .filter(|(id, ..)| !id.starts_with("smollm2") && !id.starts_with("qwen2.5"))
        .collect()
}

docchat_common::backend_tests! {
    async fn an_openai_base_url_alone_offers_its_models(backend) {
        let listed = Arc::new(Mutex::new(vec![
            json!({"id": "vllm-chat", "object": "model", "max_model_len": 16384}),
            json!({"id": "text-embedding-3-small", "object": "model"}),
            json!({"id": "second-chat", "object": "model"}),
        ]));
        let upstream = listing_upstream(listed.clone()).await;
        // No models file: only the environment's two settings (and a quick refresh).
        let app = Stack::builder(&backend)
            .everything()
            .configure(|c| {
                c.openai_base_url = Some(format!("{}/v1", upstream.base_url));
                c.openai_api_key = Some(SecretString::from(KEY));
                c.upstream_refresh_seconds = 1;
            })
            .start()
            .await;
        // Listed under the upstream's ids, the embedder left out, the stated context kept
        // and the documented default (8192) otherwise; auto is the first listed.
        assert_eq!(
            models(&app).await,
            [("vllm-chat".to_owned(), 16384, true), ("second-chat".to_owned(), 8192, false)]
        );
        let listing = upstream.seen().into_iter().find(|r| r.path == "/v1/models").unwrap();
        assert!(
            listing.headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("authorization") && v == &format!("Bearer {KEY}")),
            "the listing carries the key: {:?}",
            listing.headers
        );

        // A question with llm auto goes to the first model, with the key.
        let chat = crate::completions::session(&app, ADMIN_KEY, None).await;
        let (s, answer) = app
            .call(Method::POST, &format!("/api/v1/chats/{chat}/completions"), ADMIN_KEY,
                  Some(json!({"message": "What is the capital of France?"})))
            .await;
        assert_eq!(s, 200, "{answer}");
        assert_eq!(answer["body"], "Paris (vllm-chat).", "{answer}");
        let call = upstream.seen().into_iter().rfind(|r| r.path == "/v1/chat/completions").unwrap();
        assert!(call.headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("authorization") && v == &format!("Bearer {KEY}")));
        // And through the compatible API, by the upstream's id.
        let (s, out) = app
            .call(Method::POST, "/compat_api/v1/chat/completions", ADMIN_KEY,
                  Some(json!({"model": "second-chat", "messages": [{"role": "user", "content": "Capital?"}]})))
            .await;
        assert_eq!(s, 200, "{out}");
        assert_eq!(out["choices"][0]["message"]["content"], "Paris (second-chat).");

        // A model the upstream starts serving is offered at the next refresh; one it drops
        // goes away.
        *listed.lock().unwrap() = vec![
            json!({"id": "vllm-chat", "object": "model", "max_model_len": 16384}),
            json!({"id": "new-chat", "object": "model", "context_length": 4096}),
        ];
        eventually("the refreshed listing", || async {
            models(&app).await == [("vllm-chat".to_owned(), 16384, true), ("new-chat".to_owned(), 4096, false)]
        })
        .await;
        app.stop().await;
    }

    async fn the_models_file_wins_and_a_silent_upstream_degrades_readiness(backend) {
        let listed = Arc::new(Mutex::new(vec![
            json!({"id": "shared", "object": "model"}),
            json!({"id": "only-upstream", "object": "model"}),
        ]));
        let upstream = listing_upstream(listed).await;
        // The file names `shared` too (and marks it default); an Ollama nobody runs (a
        // privileged loopback port no test binds).
        let app = Stack::builder(&backend)
            .everything()
            .models(&format!(
                "[[models]]\nname = \"shared\"\ndisplay_name = \"From the file\"\nbase_url = \"{}/v1\"\ncontext_length = 2048\ndefault = true\n",
                upstream.base_url
            ))
            .configure(|c| {
                c.openai_base_url = Some(format!("{}/v1", upstream.base_url));
                c.ollama_base_url = Some("http://127.0.0.1:9".into());
                c.default_model = Some("only-upstream".into());
            })
            .start()
            .await;
        // One `shared`, the file's; DOCCHAT_DEFAULT_MODEL moved auto.
        assert_eq!(
            models(&app).await,
            [("shared".to_owned(), 2048, false), ("only-upstream".to_owned(), 8192, true)]
        );
        // Ready, with the silent upstream as a degraded part.
        let (s, health) = read(app.http(Method::GET, "/rpc/health/readiness", Some(ADMIN_KEY)).send().await.unwrap()).await;
        assert_eq!(s, 200, "{health}");
        let degraded = health["degraded"].to_string();
        assert!(degraded.contains("model upstreams"), "{health}");
        app.stop().await;
    }
}
