//! Retrieval's second stage (issue 38): with a reranker upstream configured (a scripted
//! `POST /rerank` here), a RAG reply's references follow the reranker's order, its cost is
//! booked, `rag_config.rerank: false` keeps fusion's order, and a reranker that fails
//! leaves fusion's order with the reason in the reply's `retrieval_trace` — which its owner
//! reads and nobody else does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::{ScriptedHttp, SeenRequest};
use docchat_proto::admin::v1::LlmSpendRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{session, upstream};
use crate::harness::{
    Stack, assert_error, collection, eventually, ingest_texts, reference_names, reply_meta,
};

/// The words the scripted reranker ranks by: a passage holding the first scores highest,
/// then the second; fusion ranks the third document first for the question asked.
const RERANKER_FAVOURITE: &str = "zebra";
const RERANKER_SECOND: &str = "Lyon";

/// Price of the reranker, per million tokens: one call costs something visible.
const RERANK_PRICE: f64 = 1000.0;

/// A reranker upstream at `/rerank` scoring passages by [`RERANKER_FAVOURITE`] and
/// [`RERANKER_SECOND`]; while `failing` is set it answers 500.
async fn reranker(failing: Arc<AtomicBool>) -> ScriptedHttp {
    ScriptedHttp::start(Arc::new(move |r: &SeenRequest| {
        if r.path != "/rerank" {
            return (404, "text/plain".into(), b"no such path".to_vec());
        }
        if failing.load(Ordering::SeqCst) {
            return (500, "text/plain".into(), b"the reranker is down".to_vec());
        }
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let results: Vec<Value> = body["documents"]
            .as_array()
            .map(|docs| {
                docs.iter()
                    .enumerate()
                    .map(|(index, d)| {
                        let text = d.as_str().unwrap_or_default();
                        let score = if text.contains(RERANKER_FAVOURITE) {
                            0.9
                        } else if text.contains(RERANKER_SECOND) {
                            0.5
                        } else {
                            0.1
                        };
                        json!({"index": index, "relevance_score": score})
                    })
                    .collect()
            })
            .unwrap_or_default();
        (
            200,
            "application/json".into(),
            json!({"results": results}).to_string().into_bytes(),
        )
    }))
    .await
}

/// A stack whose models file names the scripted chat model and the scripted reranker.
async fn app(
    backend: &docchat_common::testing::Backend,
    chat: &ScriptedHttp,
    rerank: &ScriptedHttp,
) -> Stack {
    let models = format!(
        "{}\n[[models]]\nname = \"scripted-reranker\"\nkind = \"rerank\"\nbase_url = \"{}\"\ninput_price = {RERANK_PRICE}\n",
        docchat_test_stack::scripted_model(&chat.base_url),
        rerank.base_url
    );
    Stack::builder(backend)
        .everything()
        .models(&models)
        .start()
        .await
}

/// A collection of `key`'s with three short documents, ingested.
async fn three_documents(app: &Stack, key: &str) -> String {
    let cid = collection(app, key).await;
    let documents = [
        (
            "capital.md",
            "# France\n\nParis is the capital of France. The capital of France lies on the Seine.",
        ),
        (
            "museum.md",
            "# Museums\n\nThe Louvre holds a painted zebra among its collections.",
        ),
        (
            "cities.md",
            "# Cities\n\nLyon is a large city in the south-east, known for its food.",
        ),
    ];
    ingest_texts(app, key, &cid, &documents, 3).await;
    cid
}

/// A RAG answer in a new session over `cid`: the reply's id, its references' document
/// names in order, and its retrieval_trace.
async fn ask(app: &Stack, key: &str, cid: &str, rag_config: Value) -> (String, Vec<String>, Value) {
    let chat = session(app, key, Some(cid)).await;
    let (s, answer) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(json!({"message": "What is the capital of France?", "rag_config": rag_config})),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    let reply = answer["message_id"].as_str().unwrap().to_owned();
    let names = reference_names(app, key, &reply).await;
    let trace = reply_meta(app, key, &reply, "retrieval_trace").await;
    (reply, names, trace)
}

/// The reranker's status in a trace's (first) search.
fn reranker_of(trace: &Value) -> &Value {
    &trace["searches"][0]["search"]["reranker"]
}

async fn spend(app: &Stack, user_id: &str, username: &str) -> f64 {
    let who = docchat_common::Caller {
        user_id: user_id.to_owned(),
        ..docchat_common::testing::user(username, false)
    };
    AdminServiceClient::new(app.admin().channel())
        .get_llm_spend(app.req(Service::Admin, &who, LlmSpendRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .cost_total
}

docchat_common::backend_tests! {
    async fn references_follow_the_reranker_and_its_cost_is_booked(backend) {
        let failing = Arc::new(AtomicBool::new(false));
        let (chat, rerank) = (upstream(Duration::ZERO).await, reranker(failing.clone()).await);
        let app = app(&backend, &chat, &rerank).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = three_documents(&app, &alice).await;

        // Fusion alone: the document that answers the question's words comes first.
        let (_, fused, trace) = ask(&app, &alice, &cid, json!({"rag_type": "rag", "rerank": false})).await;
        assert_eq!(fused[0], "capital.md", "{}: {fused:?}", backend.name);
        assert_eq!(reranker_of(&trace)["status"], "off", "{}: {trace}", backend.name);
        assert!(rerank.seen().is_empty(), "{}: rerank false calls no reranker", backend.name);

        // Reranked: the reranker's order, its scores on the references' trace.
        let (reply, names, trace) = ask(&app, &alice, &cid, json!({"rag_type": "rag"})).await;
        assert_eq!(names, ["museum.md", "cities.md", "capital.md"], "{}", backend.name);
        assert_eq!(reranker_of(&trace)["status"], "used", "{}: {trace}", backend.name);
        assert_eq!(reranker_of(&trace)["model"], "scripted-reranker", "{}", backend.name);
        let candidates = trace["searches"][0]["search"]["candidates"].as_array().unwrap();
        assert_eq!(candidates[0]["reranked"]["rank"], 1, "{}: {trace}", backend.name);
        assert_eq!(candidates[0]["returned"], 1, "{}: {trace}", backend.name);
        assert!(candidates[0]["fused"]["rank"].as_u64() > Some(1), "{}: fusion put it lower: {trace}", backend.name);
        assert!(candidates.iter().all(|c| c.get("dense").is_some() || c.get("lexical").is_some()), "{trace}");
        assert_eq!(trace["kept"].as_array().map(Vec::len), Some(3), "{}: {trace}", backend.name);
        let sent: Value = serde_json::from_slice(&rerank.seen()[0].body).unwrap();
        assert_eq!(sent["query"], "What is the capital of France?");
        assert_eq!(sent["documents"].as_array().map(Vec::len), Some(3), "{sent}");

        // Its cost is in the reply's usage and in the ledger (ingest-service books it).
        let stats = reply_meta(&app, &alice, &reply, "usage_stats").await;
        let call = stats["calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["purpose"] == "rerank")
            .unwrap_or_else(|| panic!("no rerank call in {stats}"))
            .clone();
        let rerank_cost = call["cost"].as_f64().unwrap();
        assert!(rerank_cost > 0.0, "{}: {stats}", backend.name);
        eventually("the reranker's cost is booked", || async {
            spend(&app, &alice_id, "alice").await >= rerank_cost
        })
        .await;

        // Only its owner reads the trace.
        let (s, b) = app
            .call(Method::GET, &format!("/api/v1/messages/{reply}/meta?info_type=retrieval_trace"), &bob, None)
            .await;
        assert_error(s, &b, 404);

        // A reranker that fails: fusion's order, and the trace says why.
        failing.store(true, Ordering::SeqCst);
        let (_, names, trace) = ask(&app, &alice, &cid, json!({"rag_type": "rag"})).await;
        assert_eq!(names, fused, "{}: fusion's order stands", backend.name);
        assert_eq!(reranker_of(&trace)["status"], "failed", "{}: {trace}", backend.name);
        let reason = reranker_of(&trace)["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("500"), "{}: {trace}", backend.name);
        app.stop().await;
    }
}
