//! References outlive their documents: a reply keeps its references when a document it was
//! answered from is deleted, and they then say so (`were_references_deleted`).

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{app_with, collection_with, session, upstream};
use crate::harness::{Stack, eventually};

/// A RAG answer in a new session over `collection`: its reply's id.
async fn answer(app: &Stack, key: &str, collection: &str) -> String {
    let chat = session(app, key, Some(collection)).await;
    let (s, answer) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(json!({"message": "What is the capital of France?", "rag_config": {"rag_type": "rag"}})),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    answer["message_id"].as_str().unwrap().to_owned()
}

async fn references(app: &Stack, key: &str, reply: &str) -> Value {
    let (s, refs) = app
        .call(
            Method::GET,
            &format!("/api/v1/messages/{reply}/references"),
            key,
            None,
        )
        .await;
    assert_eq!(s, 200, "{refs}");
    assert!(!refs.as_array().unwrap().is_empty(), "{refs}");
    refs
}

docchat_common::backend_tests! {
    async fn references_say_when_their_document_was_deleted(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let text = b"# France\n\nParis is the capital of France. The Seine flows through Paris.\n";
        let doomed = collection_with(&app, &alice, "france.md", text.to_vec()).await;
        let kept = collection_with(&app, &alice, "paris.md", text.to_vec()).await;
        let doomed_reply = answer(&app, &alice, &doomed).await;
        let kept_reply = answer(&app, &alice, &kept).await;

        let refs = references(&app, &alice, &doomed_reply).await;
        assert_eq!(refs[0]["were_references_deleted"], false, "{refs}");
        let document = refs[0]["document_id"].as_str().unwrap().to_owned();
        let (s, body) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{document}"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 204, "{body}");

        // ingest-service's `ingest.document.deleted` reaches chat-service.
        eventually("the references of the deleted document say so", || async {
            references(&app, &alice, &doomed_reply).await[0]["were_references_deleted"] == true
        })
        .await;
        let refs = references(&app, &alice, &doomed_reply).await;
        for r in refs.as_array().unwrap() {
            assert_eq!(r["document_id"], document.as_str(), "{refs}");
            assert_eq!(r["were_references_deleted"], true, "{refs}");
            assert_eq!(r["document_name"], "france.md", "the reference is kept: {refs}");
        }
        // A reply from another document is untouched.
        let refs = references(&app, &alice, &kept_reply).await;
        for r in refs.as_array().unwrap() {
            assert_ne!(r["document_id"], document.as_str());
            assert_eq!(r["were_references_deleted"], false, "{refs}");
        }
        app.stop().await;
    }
}
