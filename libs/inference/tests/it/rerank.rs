//! The reranker client against scripted HTTP upstreams: the shared `/rerank` call, the
//! `/v1/rerank` path when `/rerank` is not there, TEI's bare answer, batches of at most
//! `max_documents`, usage reported or estimated, and failures and timeouts as errors.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use docchat_inference::{Registry, RerankError, Reranker};
use serde_json::{Value, json};

fn reranker(base_url: &str, extra: &str) -> Reranker {
    let text = format!(
        "[[models]]\nname = \"chat\"\nbase_url = \"{base_url}\"\n\n[[models]]\nname = \"rr\"\nkind = \"rerank\"\nbase_url = \"{base_url}\"\nupstream_model = \"bge-reranker\"\ninput_price = 2.0\n{extra}"
    );
    let registry = Registry::parse(&text).unwrap();
    let entry = registry.rerank_model().expect("the rerank entry");
    assert_eq!(registry.resolve("rr"), None, "a reranker is no chat model");
    Reranker::from_entry(entry).unwrap()
}

/// Scores a document by its length (longer is better), in the Cohere shape at `path`.
fn by_length(path: &'static str, usage: bool) -> docchat_common::testing::Script {
    Arc::new(move |r: &SeenRequest| {
        if r.path != path {
            return (404, "text/plain".into(), Vec::new());
        }
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        let results: Vec<Value> = body["documents"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "relevance_score": d.as_str().unwrap().len() as f64}))
            .collect();
        let mut answer = json!({"results": results});
        if usage {
            answer["usage"] = json!({"total_tokens": 1000});
        }
        (
            200,
            "application/json".into(),
            answer.to_string().into_bytes(),
        )
    })
}

fn docs(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

#[tokio::test]
async fn scores_order_the_documents_and_usage_is_priced() {
    let upstream = ScriptedHttp::start(by_length("/rerank", true)).await;
    let r = reranker(&upstream.base_url, "");
    let done = r
        .rerank(
            "q",
            &docs(&["bb", "a", "dddd", "ccc"]),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(
        done.scores.iter().map(|s| s.0).collect::<Vec<_>>(),
        [2, 3, 0, 1]
    );
    assert_eq!(done.tokens, 1000);
    assert!((done.cost - 0.002).abs() < 1e-12, "{}", done.cost);
    let sent: Value = serde_json::from_slice(&upstream.seen()[0].body).unwrap();
    assert_eq!(sent["model"], "bge-reranker");
    assert_eq!(sent["query"], "q");
    assert_eq!(sent["top_n"], 4);
}

#[tokio::test]
async fn the_versioned_path_is_tried_and_kept() {
    let upstream = ScriptedHttp::start(by_length("/v1/rerank", false)).await;
    let r = reranker(&upstream.base_url, "");
    for _ in 0..2 {
        let done = r
            .rerank("query", &docs(&["x", "yy"]), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(done.scores[0].0, 1);
        // Estimated: 4 bytes a token over the query once per document and the documents.
        assert_eq!(done.tokens, ("query".len() * 2 + 3).div_ceil(4) as u64);
    }
    let paths: Vec<String> = upstream.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        paths,
        ["/rerank", "/v1/rerank", "/v1/rerank"],
        "the path that worked is kept"
    );
}

#[tokio::test]
async fn tei_answers_and_batches_of_max_documents_are_read() {
    let upstream = ScriptedHttp::start(Arc::new(|r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        let n = body["documents"].as_array().unwrap().len();
        // TEI: a bare list, "score"; the last document of a batch scores highest.
        let results: Vec<Value> = (0..n)
            .map(|i| json!({"index": i, "score": i as f64 / 10.0}))
            .collect();
        (
            200,
            "application/json".into(),
            Value::Array(results).to_string().into_bytes(),
        )
    }))
    .await;
    let r = reranker(&upstream.base_url, "max_documents = 2");
    let done = r
        .rerank(
            "q",
            &docs(&["a", "b", "c", "d", "e"]),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(upstream.seen().len(), 3, "5 documents in batches of 2");
    // Batch scores: a 0, b .1 | c 0, d .1 | e 0; ties keep the earlier document.
    assert_eq!(
        done.scores.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 3, 0, 2, 4]
    );
}

#[tokio::test]
async fn failures_malformed_answers_and_timeouts_are_errors() {
    let down = ScriptedHttp::start(Arc::new(|_: &SeenRequest| {
        (503, "text/plain".into(), b"overloaded".to_vec())
    }))
    .await;
    let e = reranker(&down.base_url, "")
        .rerank("q", &docs(&["a"]), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RerankError::Upstream { status: 503, .. }),
        "{e}"
    );

    let short = ScriptedHttp::start(Arc::new(|_: &SeenRequest| {
        let answer = json!({"results": [{"index": 0, "relevance_score": 1.0}]});
        (
            200,
            "application/json".into(),
            answer.to_string().into_bytes(),
        )
    }))
    .await;
    let e = reranker(&short.base_url, "")
        .rerank("q", &docs(&["a", "b"]), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RerankError::Malformed(_)),
        "one of two scored: {e}"
    );

    let slow = ScriptedHttp::start_streaming(Arc::new(|_: &SeenRequest| Streamed {
        status: 200,
        content_type: "application/json".into(),
        parts: vec![(Duration::from_secs(5), b"{\"results\":[]}".to_vec())],
    }))
    .await;
    let started = std::time::Instant::now();
    let e = reranker(&slow.base_url, "")
        .rerank("q", &docs(&["a"]), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(e, RerankError::Timeout(_)), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the budget bounds the call"
    );
}
