//! "Not in the documents" (issue 38): a RAG question the collection comes nowhere near
//! (its closest passage's similarity under `rag_min_similarity`) is answered so, without a
//! model call, with the closest passages still as references and the reason in the trace;
//! a question the documents answer goes to the model as before; 0 turns it off.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{ANSWER, collection_with, session, upstream};
use crate::harness::{Stack, reference_names, reply_meta};

const NOT_IN_DOCUMENTS: &str = "I could not find this in the documents of this collection";

async fn ask(app: &Stack, key: &str, cid: &str, question: &str) -> (String, String) {
    let chat = session(app, key, Some(cid)).await;
    let (s, answer) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(json!({"message": question, "rag_config": {"rag_type": "rag"}})),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    (
        answer["message_id"].as_str().unwrap().to_owned(),
        answer["body"].as_str().unwrap().to_owned(),
    )
}

docchat_common::backend_tests! {
    async fn a_question_the_documents_do_not_answer_is_answered_so(backend) {
        let model = upstream(Duration::ZERO).await;
        for threshold in [0.5, 0.0] {
            let app = Stack::builder(&backend)
                .everything()
                .scripted_model(&model.base_url)
                .configure(|c| c.rag_min_similarity = threshold)
                .start()
                .await;
            let (_, alice) = app.user("alice").await;
            let text = b"# France\n\nParis is the capital of France. The Seine flows through Paris.\n";
            let cid = collection_with(&app, &alice, "france.md", text.to_vec()).await;

            // Answered by the documents: the model answers.
            let (_, body) = ask(&app, &alice, &cid, "What is the capital of France?").await;
            assert_eq!(body, ANSWER, "{}", backend.name);

            let calls = model.seen().len();
            let (reply, body) = ask(&app, &alice, &cid, "How long should sourdough bread proof before baking?").await;
            let trace = reply_meta(&app, &alice, &reply, "retrieval_trace").await;
            let similarity = trace["top_similarity"].as_f64().unwrap();
            assert!(similarity < 0.5, "{}: {trace}", backend.name);
            let names = reference_names(&app, &alice, &reply).await;
            assert_eq!(names[0], "france.md", "{}: the closest passage is kept", backend.name);
            if threshold > 0.0 {
                assert!(body.starts_with(NOT_IN_DOCUMENTS), "{}: {body}", backend.name);
                assert_eq!(trace["not_in_documents"]["threshold"], threshold, "{}: {trace}", backend.name);
                assert_eq!(model.seen().len(), calls, "{}: no model call", backend.name);
            } else {
                assert_eq!(body, ANSWER, "{}: 0 turns it off", backend.name);
                assert_eq!(trace["not_in_documents"], Value::Null, "{}: {trace}", backend.name);
            }
            app.stop().await;
        }
    }
}
