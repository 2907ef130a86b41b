//! Follow-up questions (issue 38): in a chat with history, "and its default?" is searched as
//! the standalone question it stands for, which the chat model writes from the conversation
//! (booked as `condense`, shown in the reply's `retrieval_trace`); with the history off the
//! question is searched as asked — and then finds the wrong document.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::session;
use crate::harness::{Stack, collection, ingest_texts, reference_names, reply_meta};

/// What the scripted model writes when asked for a standalone query.
const STANDALONE: &str = "What compression level does zstd use by default?";

/// A chat model: a standalone query when asked to rewrite a follow-up, else a short answer
/// (streamed or not).
async fn model() -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(|r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        let text = if system.starts_with("Rewrite the user's last question") {
            STANDALONE
        } else {
            "It depends."
        };
        let answer = if body["stream"] == json!(true) {
            let delta = json!({"choices": [{"delta": {"content": text}}]});
            format!("data: {delta}\n\ndata: [DONE]\n\n")
        } else {
            json!({
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 9}
            })
            .to_string()
        };
        Streamed {
            status: 200,
            content_type: if body["stream"] == json!(true) {
                "text/event-stream".into()
            } else {
                "application/json".into()
            },
            parts: vec![(Duration::ZERO, answer.into_bytes())],
        }
    }))
    .await
}

async fn ask(app: &Stack, key: &str, chat: &str, message: &str, history: &str) -> String {
    let (s, answer) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(json!({"message": message, "include_chat_history": history, "rag_config": {"rag_type": "rag"}})),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    answer["message_id"].as_str().unwrap().to_owned()
}

docchat_common::backend_tests! {
    async fn a_follow_up_is_searched_with_its_conversation_in_mind(backend) {
        let upstream = model().await;
        let app = Stack::builder(&backend)
            .everything()
            .scripted_model(&upstream.base_url)
            .start()
            .await;
        let (_, alice) = app.user("alice").await;
        let cid = collection(&app, &alice).await;
        let documents = [
            ("zstd.md", "# zstd\n\nzstd compresses fast. Without a level option it uses compression level 3; levels go from 1 to 19."),
            ("editor.md", "# Editor settings\n\nAnd its default theme? Its default is dark, and its default font is mono: the defaults and their default values."),
        ];
        ingest_texts(&app, &alice, &cid, &documents, 2).await;

        // With the conversation: the standalone query finds zstd's page.
        let chat = session(&app, &alice, Some(&cid)).await;
        let first = ask(&app, &alice, &chat, "How fast does zstd compress?", "on").await;
        let trace = reply_meta(&app, &alice, &first, "retrieval_trace").await;
        assert_eq!(trace["condensed"], Value::Null, "{}: a first question is searched as asked: {trace}", backend.name);
        let follow_up = ask(&app, &alice, &chat, "and its default?", "on").await;
        assert_eq!(reference_names(&app, &alice, &follow_up).await[0], "zstd.md", "{}", backend.name);
        let trace = reply_meta(&app, &alice, &follow_up, "retrieval_trace").await;
        assert_eq!(trace["condensed"]["query"], STANDALONE, "{}: {trace}", backend.name);
        assert_eq!(trace["searches"][0]["search"]["query"], STANDALONE, "{}: {trace}", backend.name);
        let rewrite = upstream
            .seen()
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
            .find(|b| b["messages"][0]["content"].as_str().unwrap_or_default().starts_with("Rewrite"))
            .expect("a condensing call");
        let asked = rewrite["messages"][1]["content"].as_str().unwrap();
        assert!(asked.contains("User: How fast does zstd compress?") && asked.ends_with("Last question: and its default?"), "{asked}");
        assert!(rewrite["max_tokens"].as_u64() <= Some(96), "{rewrite}");
        let stats = reply_meta(&app, &alice, &follow_up, "usage_stats").await;
        assert!(
            stats["calls"].as_array().unwrap().iter().any(|c| c["purpose"] == "condense"),
            "{}: the condensing call is booked: {stats}",
            backend.name
        );

        // The same follow-up without the history: searched as asked, it misses.
        let calls = upstream.seen().len();
        let alone = ask(&app, &alice, &chat, "and its default?", "off").await;
        assert_eq!(reference_names(&app, &alice, &alone).await[0], "editor.md", "{}", backend.name);
        let trace = reply_meta(&app, &alice, &alone, "retrieval_trace").await;
        assert_eq!(trace["condensed"], Value::Null, "{}: {trace}", backend.name);
        assert_eq!(upstream.seen().len(), calls + 1, "{}: no condensing call", backend.name);
        app.stop().await;
    }
}
