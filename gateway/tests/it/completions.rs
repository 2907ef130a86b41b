//! Completions through the REST API against a scripted OpenAI-compatible upstream (real
//! HTTP, SSE streams with delays): plain and streamed answers, stored messages, metadata,
//! references from RAG, control of a running stream, failures, ownership.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Stack, eventually};

/// The reply the scripted model streams, one word a token.
pub(crate) const ANSWER: &str = "Paris is the capital of France. It lies on the Seine. The city has many bridges and museums to visit.";

/// An upstream whose streamed answers send one word every `delay`. A question containing
/// FAIL breaks off after three words; a long question (LONG) repeats the answer 20 times.
pub(crate) async fn upstream(delay: Duration) -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(move |r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        if body["stream"] != json!(true) {
            let text = if last.contains("User:") {
                "1. Where is the Seine?\n2. What museums are there?"
            } else {
                "Paris is the French capital."
            };
            let answer = json!({
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 5}
            });
            return Streamed {
                status: 200,
                content_type: "application/json".into(),
                parts: vec![(Duration::ZERO, answer.to_string().into_bytes())],
            };
        }
        let text = if last.contains("LONG") {
            vec![ANSWER; 20].join(" ")
        } else {
            ANSWER.to_owned()
        };
        let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
        let mut parts: Vec<(Duration, Vec<u8>)> = Vec::new();
        for (i, w) in words.iter().enumerate() {
            if last.contains("FAIL") && i == 3 {
                // Broken off: no [DONE].
                return Streamed {
                    status: 200,
                    content_type: "text/event-stream".into(),
                    parts,
                };
            }
            let chunk = json!({"choices": [{"delta": {"content": w}}]});
            parts.push((delay, format!("data: {chunk}\n\n").into_bytes()));
        }
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": words.len()}});
        parts.push((Duration::ZERO, format!("data: {usage}\n\ndata: [DONE]\n\n").into_bytes()));
        Streamed {
            status: 200,
            content_type: "text/event-stream".into(),
            parts,
        }
    }))
    .await
}

/// docchat with the `scripted` model served by `upstream`.
pub(crate) async fn app_with(
    backend: &docchat_common::testing::Backend,
    upstream: &ScriptedHttp,
) -> Stack {
    Stack::builder(backend)
        .everything()
        .scripted_model(&upstream.base_url)
        .start()
        .await
}

/// The JSON lines of a streamed answer, read as they come.
pub(crate) struct Lines {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Lines {
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Value> {
        loop {
            if let Some(i) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match tokio::time::timeout(wait, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
                _ => return None,
            }
        }
    }

    /// Reads to the end: the bodies of the lines before the last, joined, and the last
    /// (`finished` true). Panics when the stream ends or stalls for `wait` before that.
    pub(crate) async fn rest(&mut self, wait: Duration) -> (String, Value) {
        let mut body = String::new();
        loop {
            let line = self
                .next(wait)
                .await
                .expect("the stream ends with a finished line");
            if line["finished"] == true {
                return (body, line);
            }
            body.push_str(
                line["body"]
                    .as_str()
                    .expect("a line before the last has a body"),
            );
        }
    }
}

pub(crate) async fn stream(app: &Stack, key: &str, session: &str, body: Value) -> Lines {
    let response = app
        .http(
            Method::POST,
            &format!("/api/v1/chats/{session}/completions"),
            Some(key),
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/jsonl");
    Lines {
        response,
        buffer: Vec::new(),
    }
}

pub(crate) async fn session(app: &Stack, key: &str, collection: Option<&str>) -> String {
    let path = match collection {
        Some(c) => format!("/api/v1/chats?collection_id={c}"),
        None => "/api/v1/chats".to_owned(),
    };
    let (s, chat) = app.call(Method::POST, &path, key, Some(json!({}))).await;
    assert_eq!(s, 201, "{chat}");
    chat["id"].as_str().unwrap().to_owned()
}

/// A new collection of `key`'s holding one document, ingested: its id.
pub(crate) async fn collection_with(app: &Stack, key: &str, name: &str, bytes: Vec<u8>) -> String {
    let cid = crate::harness::collection(app, key).await;
    crate::harness::ingest(app, key, &cid, name, bytes).await;
    crate::harness::wait_documents(app, key, &cid, 1).await;
    cid
}

docchat_common::backend_tests! {
    async fn answers_are_stored_with_metadata_and_rag_cites_its_documents(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;

        // llm_only, not streamed.
        let chat = session(&app, &alice, None).await;
        let path = format!("/api/v1/chats/{chat}/completions");
        let (s, answer) = app
            .call(Method::POST, &path, &alice, Some(json!({"message": "What is the capital of France?", "llm": "auto", "stream": false, "llm_args": {"temperature": 0.2, "max_new_tokens": 64}})))
            .await;
        assert_eq!(s, 200, "{}: {answer}", backend.name);
        assert_eq!(answer["body"], ANSWER);
        let reply_id = answer["message_id"].as_str().unwrap().to_owned();
        let sent: Value = serde_json::from_slice(&model.seen().last().unwrap().body).unwrap();
        assert_eq!(sent["max_tokens"], 64);
        assert_eq!(sent["stream"], true);

        let (s, messages) = app
            .call(
                Method::GET,
                &format!("/api/v1/chats/{chat}/messages"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200);
        let messages = messages.as_array().unwrap();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0]["reply_to"].is_null());
        assert_eq!(messages[1]["id"], reply_id.as_str());
        assert_eq!(messages[1]["reply_to"], messages[0]["id"]);
        assert_eq!(messages[1]["has_references"], false);
        let (_, got) = app
            .call(Method::GET, &format!("/api/v1/chats/{chat}"), &alice, None)
            .await;
        assert_eq!(got["latest_message_content"], ANSWER);

        let (s, meta) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply_id}/meta?info_type=usage_stats"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200, "{meta}");
        assert_eq!(meta[0]["message_type"], "usage_stats");
        let stats: Value = serde_json::from_str(meta[0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(stats["input_tokens"], 42);
        assert_eq!(stats["output_tokens"], 20);
        let cost = stats["cost"].as_f64().unwrap();
        assert!((cost - (42.0 + 40.0) / 1e6).abs() < 1e-12, "{stats}");
        let (_, raw) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply_id}/meta?info_type=prompt_raw"),
                &alice,
                None,
            )
            .await;
        assert!(
            raw[0]["content"]
                .as_str()
                .unwrap()
                .contains("What is the capital of France?")
        );
        let (s, refs) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply_id}/references"),
                &alice,
                None,
            )
            .await;
        assert_eq!((s, refs), (200, json!([])));

        // Streamed: the question id first, the pieces, then the reply id.
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "And again?", "stream": true, "include_chat_history": "on"}),
        )
        .await;
        let first = lines.next(Duration::from_secs(10)).await.unwrap();
        assert!(first["question_id"].is_string());
        let (body, last) = lines.rest(Duration::from_secs(10)).await;
        assert_eq!(body, ANSWER);
        assert!(
            last["message_id"].is_string() && last.get("error").is_none(),
            "{last}"
        );
        // History went with it.
        let sent: Value = serde_json::from_slice(&model.seen().last().unwrap().body).unwrap();
        let roles: Vec<&str> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);

        // Suggested follow-ups come from the conversation.
        let (s, questions) = app
            .call(
                Method::GET,
                &format!("/api/v1/chats/{chat}/questions?limit=2"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200, "{questions}");
        assert_eq!(
            questions,
            json!([{"question": "Where is the Seine?"}, {"question": "What museums are there?"}])
        );

        // Bad input and other people's things.
        let before = message_count(&app, &chat, &alice).await;
        for (body, want) in [
            (
                json!({"message": "x", "rag_config": {"rag_type": "rag"}}),
                400,
            ),
            (
                json!({"message": "x", "rag_config": {"rag_type": "agentic_rag"}}),
                400,
            ),
            (json!({"message": "x", "llm": "no-such-model"}), 400),
            (json!({"message": "   "}), 400),
            (
                json!({"message": "x", "llm_args": {"memory_block_id": "not-a-uuid"}}),
                400,
            ),
        ] {
            let (s, e) = app
                .call(Method::POST, &path, &alice, Some(body.clone()))
                .await;
            crate::harness::assert_error(s, &e, want);
        }
        let (s, e) = app
            .call(Method::POST, &path, &bob, Some(json!({"message": "mine?"})))
            .await;
        crate::harness::assert_error(s, &e, 404);
        // The refused questions were rolled back with their checks: nothing was stored.
        assert_eq!(message_count(&app, &chat, &alice).await, before);
        for path in [
            format!("/api/v1/messages/{reply_id}/meta?info_type=usage_stats"),
            format!("/api/v1/messages/{reply_id}/references"),
            format!("/api/v1/chats/{chat}/questions"),
        ] {
            let (s, e) = app.call(Method::GET, &path, &bob, None).await;
            crate::harness::assert_error(s, &e, 404);
        }
        let question = messages[0]["id"].as_str().unwrap();
        let (s, e) = app
            .call(
                Method::POST,
                &format!("/api/v1/messages/{question}/stop"),
                &bob,
                None,
            )
            .await;
        crate::harness::assert_error(s, &e, 404);
        // Control of the caller's question whose reply is finished is a no-op that answers
        // 204 (the stop-as-it-finishes race), and leaves the stored reply as it was.
        for action in ["stop", "pause", "resume", "finish"] {
            let (s, e) = app
                .call(
                    Method::POST,
                    &format!("/api/v1/messages/{question}/{action}"),
                    &alice,
                    None,
                )
                .await;
            assert_eq!(s, 204, "{action} on a finished reply: {e}");
        }
        assert_eq!(message_count(&app, &chat, &alice).await, before);
        // An unknown question stays a 404.
        let (s, e) = app
            .call(
                Method::POST,
                &format!("/api/v1/messages/{}/stop", uuid::Uuid::now_v7()),
                &alice,
                None,
            )
            .await;
        crate::harness::assert_error(s, &e, 404);
        let (s, e) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply_id}/meta"),
                &alice,
                None,
            )
            .await;
        crate::harness::assert_error(s, &e, 400);

        // RAG over a collection: references name the document and page.
        let cid = collection_with(
            &app,
            &alice,
            "france.md",
            b"# France\n\nParis is the capital of France. The Seine flows through Paris.\n"
                .to_vec(),
        )
        .await;
        let rag_chat = session(&app, &alice, Some(&cid)).await;
        for rag_type in ["rag", "hyde1", "hyde2", "rag+", "all_data"] {
            let (s, answer) = app
                .call(Method::POST, &format!("/api/v1/chats/{rag_chat}/completions"), &alice, Some(json!({"message": "What is the capital of France?", "rag_config": {"rag_type": rag_type}})))
                .await;
            assert_eq!(s, 200, "{rag_type}: {answer}");
            let reply = answer["message_id"].as_str().unwrap();
            let (_, refs) = app
                .call(
                    Method::GET,
                    &format!("/api/v1/messages/{reply}/references"),
                    &alice,
                    None,
                )
                .await;
            assert_eq!(refs[0]["document_name"], "france.md", "{rag_type}: {refs}");
            assert_eq!(refs[0]["pages"], "1");
            assert!(refs[0]["chunk_id"].is_i64() && refs[0]["score"].is_f64());
            let sent: Value = serde_json::from_slice(&model.seen().last().unwrap().body).unwrap();
            assert!(
                sent["messages"][1]["content"]
                    .as_str()
                    .unwrap()
                    .contains("[1] france.md, page 1"),
                "{sent}"
            );
        }
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn running_replies_pause_resume_stop_and_finish(backend) {
        let backend = &backend;
        let model = upstream(Duration::from_millis(40)).await;
        let app = app_with(backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let chat = session(&app, &alice, None).await;
        let control = |question: String, action: &'static str| {
            let app = &app;
            let alice = alice.clone();
            async move {
                let (s, body) = app
                    .call(
                        Method::POST,
                        &format!("/api/v1/messages/{question}/{action}"),
                        &alice,
                        None,
                    )
                    .await;
                assert_eq!(s, 204, "{action}: {body}");
            }
        };

        // Pause holds the stream; resume continues it; stop ends it and keeps the partial reply.
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "LONG please", "stream": true}),
        )
        .await;
        let question = lines.next(Duration::from_secs(10)).await.unwrap()["question_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut body = String::new();
        for _ in 0..3 {
            body.push_str(
                lines.next(Duration::from_secs(10)).await.unwrap()["body"]
                    .as_str()
                    .unwrap(),
            );
        }
        control(question.clone(), "pause").await;
        // What was already on its way (a few buffered lines) may still arrive; then nothing.
        let mut in_flight = 0;
        while let Some(line) = lines.next(Duration::from_millis(400)).await {
            assert_ne!(line["finished"], true, "a pause does not end the reply");
            body.push_str(line["body"].as_str().unwrap());
            in_flight += 1;
            assert!(in_flight <= 12, "paused, yet the reply keeps coming");
        }
        assert!(
            lines.next(Duration::from_millis(300)).await.is_none(),
            "paused: nothing is sent"
        );
        control(question.clone(), "resume").await;
        let line = lines.next(Duration::from_secs(10)).await.expect("resumed");
        body.push_str(line["body"].as_str().unwrap());
        control(question.clone(), "pause").await;
        control(question.clone(), "stop").await;
        let (tail, last) = lines.rest(Duration::from_secs(10)).await;
        body.push_str(&tail);
        let reply = last["message_id"].as_str().unwrap().to_owned();
        let full = vec![ANSWER; 20].join(" ");
        assert!(
            body.len() < full.len() / 2,
            "stopped early: {} of {}",
            body.len(),
            full.len()
        );
        let (_, messages) = app
            .call(
                Method::GET,
                &format!("/api/v1/chats/{chat}/messages"),
                &alice,
                None,
            )
            .await;
        let stored = messages
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == reply.as_str())
            .unwrap()
            .clone();
        assert_eq!(
            stored["content"],
            body.as_str(),
            "the partial reply is kept"
        );
        eventually("the upstream stream was closed", || async {
            model.aborted() >= 1
        })
        .await;

        // Finish ends at the end of the current sentence.
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "LONG again", "stream": true, "include_chat_history": "off"}),
        )
        .await;
        let question = lines.next(Duration::from_secs(10)).await.unwrap()["question_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut body = String::new();
        for _ in 0..2 {
            body.push_str(
                lines.next(Duration::from_secs(10)).await.unwrap()["body"]
                    .as_str()
                    .unwrap(),
            );
        }
        control(question, "finish").await;
        body.push_str(&lines.rest(Duration::from_secs(10)).await.0);
        assert!(body.trim_end().ends_with('.'), "{body:?}");
        assert!(body.len() < full.len() / 2, "{body:?}");

        // An upstream that breaks off: an error line, and the partial reply stored with it.
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "FAIL now", "stream": true}),
        )
        .await;
        let (body, last) = lines.rest(Duration::from_secs(10)).await;
        assert!(
            last["error"].as_str().unwrap().contains("ended before"),
            "{last}"
        );
        assert_eq!(body, "Paris is the ");
        let reply = last["message_id"].as_str().unwrap();
        let (_, messages) = app
            .call(
                Method::GET,
                &format!("/api/v1/chats/{chat}/messages"),
                &alice,
                None,
            )
            .await;
        let stored = messages
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == reply)
            .unwrap()
            .clone();
        assert_eq!(stored["content"], "Paris is the ");
        assert!(stored["error"].is_string());
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn rag_plus_and_all_data_summarize_what_does_not_fit(backend) {
        let model = upstream(Duration::ZERO).await;
        // A small context: a long document cannot fit and must be summarized.
        let app = Stack::builder(&backend)
            .everything()
            .models(&format!(
                "[[models]]\nname = \"small\"\nprovider = \"openai\"\nbase_url = \"{}/v1\"\ncontext_length = 1024\ndefault = true\n",
                model.base_url
            ))
            .start()
            .await;
        let (_, alice) = app.user("alice").await;
        let mut text = String::from("# Atlas\n\n");
        for i in 0..40 {
            text.push_str(&format!(
                "## Region {i}\n\nRegion {i} has rivers, hills and a market town where {i} bakers sell bread every morning to travellers crossing the old stone bridge over the river.\n\n"
            ));
        }
        let cid = collection_with(&app, &alice, "atlas.md", text.into_bytes()).await;
        let chat = session(&app, &alice, Some(&cid)).await;
        for rag_type in ["all_data", "rag+"] {
            let before = model.seen().len();
            let (s, answer) = app
                .call(
                    Method::POST,
                    &format!("/api/v1/chats/{chat}/completions"),
                    &alice,
                    Some(json!({"message": "Which region has the most bakers?", "rag_config": {"rag_type": rag_type}, "llm_args": {"max_new_tokens": 128}, "include_chat_history": "off"})),
                )
                .await;
            assert_eq!(s, 200, "{}: {rag_type}: {answer}", backend.name);
            let calls: Vec<Value> = model.seen()[before..]
                .iter()
                .map(|r| serde_json::from_slice(&r.body).unwrap())
                .collect();
            let summaries: Vec<&Value> = calls
                .iter()
                .filter(|c| {
                    c["messages"][0]["content"]
                        .as_str()
                        .unwrap()
                        .starts_with("Summarize the document excerpts")
                })
                .collect();
            let last = calls.last().unwrap();
            assert_eq!(last["stream"], true);
            let context = last["messages"][1]["content"].as_str().unwrap();
            if rag_type == "all_data" {
                // Every chunk was read: the summary calls saw the first and the last region.
                assert!(
                    summaries.len() >= 2,
                    "{rag_type}: {} summary calls",
                    summaries.len()
                );
                let read: String = summaries
                    .iter()
                    .map(|c| c["messages"][1]["content"].as_str().unwrap())
                    .collect();
                assert!(read.contains("Region 0 has") && read.contains("Region 39 has"));
                assert!(context.contains("notes below"), "{context}");
                assert!(
                    context.contains("Paris is the French capital."),
                    "{context}"
                );
            }
            // Each summary call fits the model's context (about four characters a token).
            for c in &summaries {
                let chars: usize = c["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["content"].as_str().unwrap().len())
                    .sum();
                assert!(chars / 4 + 512 <= 1024 + 64, "{chars} characters");
            }
            let reply = answer["message_id"].as_str().unwrap();
            let (_, refs) = app
                .call(
                    Method::GET,
                    &format!("/api/v1/messages/{reply}/references"),
                    &alice,
                    None,
                )
                .await;
            assert_eq!(refs[0]["document_name"], "atlas.md", "{refs}");
            if rag_type == "rag+" {
                // The retrieved chunks come with their neighbours, in document order.
                let refs = refs.as_array().unwrap();
                assert!(refs.len() > 1, "{refs:?}");
            }
            let (_, meta) = app
                .call(
                    Method::GET,
                    &format!("/api/v1/messages/{reply}/meta?info_type=usage_stats"),
                    &alice,
                    None,
                )
                .await;
            let stats: Value = serde_json::from_str(meta[0]["content"].as_str().unwrap()).unwrap();
            let purposes: Vec<&str> = stats["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["purpose"].as_str().unwrap())
                .collect();
            assert_eq!(
                purposes.iter().filter(|p| **p == "summary").count(),
                summaries.len(),
                "{purposes:?}"
            );
        }
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    /// Standalone without a models file: `auto` is the local GGUF model (when it was fetched),
    /// answered in-process and booked like any other.
    async fn the_local_gguf_model_answers_without_a_models_file(backend) {
        // A missing model fails in CI and is a loud skip elsewhere.
        if docchat_common::testing::model_file(docchat_common::testing::SMOLLM2_GGUF).is_none() {
            return;
        }
        let app = Stack::docchat_with(&backend, |c| c.llm_threads = 1).await;
        let (_, alice) = app.user("alice").await;
        let chat = session(&app, &alice, None).await;
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Name the capital of France.", "stream": true, "llm_args": {"max_new_tokens": 12}}),
        )
        .await;
        let mut body = String::new();
        let mut done = None;
        while let Some(line) = lines.next(Duration::from_secs(120)).await {
            if line["finished"] == json!(true) {
                done = Some(line);
                break;
            }
            assert!(line.get("error").is_none(), "{line}");
            body.push_str(line["body"].as_str().unwrap_or_default());
        }
        let done = done.expect("the reply finished");
        assert!(!body.trim().is_empty(), "the local model wrote something");
        let reply = done["message_id"].as_str().unwrap();
        let (_, meta) = app
            .call(
                Method::GET,
                &format!("/api/v1/messages/{reply}/meta?info_type=usage_stats"),
                &alice,
                None,
            )
            .await;
        let stats: Value = serde_json::from_str(meta[0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(stats["llm"], "smollm2-135m-instruct");
        assert!(stats["input_tokens"].as_u64().unwrap() > 5, "{stats}");
        let out = stats["output_tokens"].as_u64().unwrap();
        assert!((1..=12).contains(&out), "{stats}");
        assert_eq!(stats["cost"], 0.0);
        app.stop().await;
    }
}

/// How many messages the session `chat` holds.
async fn message_count(app: &Stack, chat: &str, key: &str) -> usize {
    let (s, messages) = app
        .call(
            Method::GET,
            &format!("/api/v1/chats/{chat}/messages"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{messages}");
    messages.as_array().map_or(0, Vec::len)
}

/// The JSON lines of `GET path` (all of them, within 30 s).
async fn all_lines(app: &Stack, key: &str, path: &str) -> Vec<Value> {
    let response = app.http(Method::GET, path, Some(key)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(response.headers()["content-type"], "application/jsonl");
    let mut lines = Lines {
        response,
        buffer: Vec::new(),
    };
    let mut out = Vec::new();
    while let Some(line) = lines.next(Duration::from_secs(30)).await {
        out.push(line);
    }
    out
}

docchat_common::backend_tests! {
    /// Every line of a streamed reply carries its seq; `GET /messages/{question_id}/stream`
    /// answers the lines after one — live while the reply is generated, from the stored
    /// reply after — for the question's owner only.
    async fn a_reply_is_re_attached_through_rest_after_any_seq(backend) {
        let model = upstream(Duration::from_millis(30)).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        let mut original = stream(&app, &alice, &chat, json!({"message": "Capital?", "stream": true})).await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(original.next(Duration::from_secs(10)).await.unwrap());
        }
        assert_eq!(seen.iter().map(|l| l["seq"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3], "{seen:?}");
        let question = seen[0]["question_id"].as_str().unwrap().to_owned();
        drop(original);

        let path = format!("/api/v1/messages/{question}/stream");
        let (s, body) = app.call(Method::GET, &path, &bob, None).await;
        assert_eq!((s, body["code"].as_u64()), (404, Some(404)), "{}: {body}", backend.name);
        let (s, body) = app.call(Method::GET, &format!("{path}?after=x"), &alice, None).await;
        assert_eq!(s, 400, "{}: {body}", backend.name);

        let rest = all_lines(&app, &alice, &format!("{path}?after=3")).await;
        let mut whole = seen.clone();
        whole.extend(rest);
        let seqs: Vec<u64> = whole.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=whole.len() as u64).collect::<Vec<_>>(), "{}", backend.name);
        let last = whole.last().unwrap();
        assert_eq!(last["finished"], true, "{last}");
        let body: String = whole.iter().filter_map(|l| l["body"].as_str()).collect();
        assert_eq!(body, ANSWER, "{}", backend.name);
        // Stored now: the same lines again, from any seq.
        assert_eq!(all_lines(&app, &alice, &path).await, whole, "{}", backend.name);
        assert_eq!(all_lines(&app, &alice, &format!("{path}?after=2")).await, whole[2..], "{}", backend.name);
        app.stop().await;
    }
}
