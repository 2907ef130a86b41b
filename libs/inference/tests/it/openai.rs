//! OpenAiEmbedder against a scripted OpenAI-compatible server on loopback (real HTTP, the
//! real client code path).

use std::sync::Arc;

use docchat_common::testing::{ScriptedHttp, SeenRequest};
use docchat_inference::{EmbedError, Embedder, OpenAiEmbedder, Registry};
use secrecy::SecretString;
use serde_json::{Value, json};

/// One request the server received, as these tests look at it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    body: Value,
}

impl From<&SeenRequest> for Seen {
    fn from(r: &SeenRequest) -> Self {
        Seen {
            method: r.method.clone(),
            path: r.path.clone(),
            authorization: r
                .headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone()),
            body: serde_json::from_slice(&r.body).unwrap_or(Value::Null),
        }
    }
}

type Handler = Arc<dyn Fn(&Seen) -> (u16, String) + Send + Sync>;

/// The project's scripted upstream (`docchat_common::testing::ScriptedHttp`), answering
/// JSON through `handler`.
struct Upstream {
    base_url: String,
    server: ScriptedHttp,
}

impl Upstream {
    async fn start(handler: Handler) -> Upstream {
        let server = ScriptedHttp::start(Arc::new(move |r: &SeenRequest| {
            let (status, body) = handler(&Seen::from(r));
            (status, "application/json".to_owned(), body.into_bytes())
        }))
        .await;
        Upstream {
            base_url: format!("{}/v1", server.base_url),
            server,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.server.seen().iter().map(Seen::from).collect()
    }
}

/// The vector the scripted server gives a text: not unit length, so normalization shows.
fn vector_of(text: &str) -> Vec<f32> {
    vec![text.len() as f32, 1.0, 2.0]
}

/// Answers like OpenAI, but lists the embeddings in reverse order (their `index` says
/// where each belongs).
fn embeddings_handler() -> Handler {
    Arc::new(|req: &Seen| {
        let inputs: Vec<String> = req.body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector_of(t)}))
            .collect();
        let body = json!({"object": "list", "data": data, "model": req.body["model"],
                          "usage": {"prompt_tokens": 3, "total_tokens": 3}});
        (200, body.to_string())
    })
}

fn entry(base_url: &str, extra: &str) -> docchat_inference::ModelEntry {
    let text = format!(
        "[[models]]\nname = \"remote-embed\"\nkind = \"embedding\"\nbase_url = \"{base_url}\"\nupstream_model = \"text-embedding-test\"\n{extra}"
    );
    Registry::parse(&text)
        .unwrap()
        .embedding_models()
        .next()
        .unwrap()
        .clone()
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

#[tokio::test]
async fn embeds_over_http_in_batches_in_order_and_normalized() {
    let upstream = Upstream::start(embeddings_handler()).await;
    let embedder = OpenAiEmbedder::new(
        &entry(&upstream.base_url, "context_length = 512"),
        Some(SecretString::from("sk-test-key")),
    )
    .unwrap()
    .with_batch_size(2);
    assert_eq!(embedder.name(), "remote-embed");
    assert_eq!(embedder.dimension(), 0, "unknown before the first answer");
    assert_eq!(embedder.max_tokens(), 512);
    assert_eq!(embedder.count_tokens("abcdef"), 2);

    let texts: Vec<String> = ["a", "bb", "ccc", "dddd", "eeeee"]
        .map(String::from)
        .to_vec();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), 5);
    for (t, v) in texts.iter().zip(&vectors) {
        let want = unit(&vector_of(t));
        for (a, b) in v.iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{t}: {v:?} vs {want:?}");
        }
    }
    assert_eq!(embedder.dimension(), 3);

    let seen = upstream.seen();
    assert_eq!(seen.len(), 3, "5 texts in batches of 2");
    for (req, inputs) in seen
        .iter()
        .zip([vec!["a", "bb"], vec!["ccc", "dddd"], vec!["eeeee"]])
    {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/embeddings");
        assert_eq!(req.authorization.as_deref(), Some("Bearer sk-test-key"));
        assert_eq!(req.body["model"], "text-embedding-test");
        assert_eq!(req.body["input"], json!(inputs));
    }
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert_eq!(upstream.seen().len(), 3, "nothing to embed, no request");
}

#[tokio::test]
async fn probe_learns_the_dimension_unless_configured() {
    let upstream = Upstream::start(embeddings_handler()).await;
    let learned = OpenAiEmbedder::new(&entry(&upstream.base_url, ""), None).unwrap();
    assert_eq!(learned.probe_dimension().await.unwrap(), 3);
    assert_eq!(learned.dimension(), 3);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization, None, "no key configured, none sent");

    let configured =
        OpenAiEmbedder::new(&entry(&upstream.base_url, "dimensions = 3"), None).unwrap();
    assert_eq!(configured.dimension(), 3);
    assert_eq!(configured.probe_dimension().await.unwrap(), 3);
    assert_eq!(
        upstream.seen().len(),
        1,
        "a configured dimension needs no request"
    );

    // An answer that contradicts the configured dimension is refused.
    let wrong = OpenAiEmbedder::new(&entry(&upstream.base_url, "dimensions = 1024"), None).unwrap();
    let err = wrong.embed(&["x".to_owned()]).await.unwrap_err();
    assert!(
        matches!(&err, EmbedError::InvalidResponse { message, .. } if message.contains("3 dimensions, expected 1024")),
        "{err}"
    );
}

#[tokio::test]
async fn upstream_errors_are_reported_with_status_and_message() {
    let upstream = Upstream::start(Arc::new(|_: &Seen| {
        (401, json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}).to_string())
    }))
    .await;
    let embedder = OpenAiEmbedder::new(&entry(&upstream.base_url, ""), None).unwrap();
    let err = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    match err {
        EmbedError::Upstream {
            model,
            status,
            message,
        } => {
            assert_eq!(model, "remote-embed");
            assert_eq!(status, 401);
            assert_eq!(message, "Incorrect API key provided");
        }
        other => panic!("unexpected {other:?}"),
    }

    let plain = Upstream::start(Arc::new(|_: &Seen| (503, "overloaded".to_owned()))).await;
    let embedder = OpenAiEmbedder::new(&entry(&plain.base_url, ""), None).unwrap();
    let err = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    assert!(
        matches!(&err, EmbedError::Upstream { status: 503, message, .. } if message == "overloaded"),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_answers_are_refused() {
    let short = Upstream::start(Arc::new(|_: &Seen| {
        (
            200,
            json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}).to_string(),
        )
    }))
    .await;
    let embedder = OpenAiEmbedder::new(&entry(&short.base_url, ""), None).unwrap();
    let err = embedder
        .embed(&["a".to_owned(), "b".to_owned()])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EmbedError::InvalidResponse { message, .. } if message.contains("1 embeddings for 2 inputs")),
        "{err}"
    );

    let garbage = Upstream::start(Arc::new(|_: &Seen| (200, "<html>".to_owned()))).await;
    let embedder = OpenAiEmbedder::new(&entry(&garbage.base_url, ""), None).unwrap();
    assert!(matches!(
        embedder.embed(&["a".to_owned()]).await,
        Err(EmbedError::InvalidResponse { .. })
    ));
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_transport_error() {
    // A port that was just free: nothing listens there.
    let (listener, url) = docchat_common::testing::bind().await;
    drop(listener);
    let embedder = OpenAiEmbedder::new(&entry(&format!("{url}/v1"), ""), None).unwrap();
    let err = embedder.embed(&["a".to_owned()]).await.unwrap_err();
    assert!(matches!(err, EmbedError::Transport { .. }), "{err}");
}
