//! Embeddings from any OpenAI-compatible `/v1/embeddings` upstream (OpenAI, vLLM, Ollama,
//! llama.cpp server, text-embeddings-inference …), configured as a `kind = "embedding"`
//! entry of the models file.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{EmbedError, Embedder, l2_normalize};
use crate::registry::ModelEntry;

/// Inputs per upstream request (OpenAI accepts up to 2048; smaller requests fail less).
const DEFAULT_BATCH_SIZE: usize = 64;
/// Whole-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorDetail {
    Object { message: String },
    Text(String),
}

/// An embedding upstream speaking the OpenAI embeddings API.
pub struct OpenAiEmbedder {
    name: String,
    url: String,
    upstream_model: String,
    api_key: Option<SecretString>,
    client: reqwest::Client,
    /// The vector size: from the models file (`dimensions`), else learned from the first
    /// answer; 0 while unknown.
    dimension: AtomicUsize,
    max_tokens: usize,
    batch_size: usize,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("upstream_model", &self.upstream_model)
            .field("dimension", &self.dimension.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// Builds the embedder of a models-file entry, reading its API key from the environment
    /// variable the entry names (`api_key_env`); that variable must be set.
    pub fn from_entry(entry: &ModelEntry) -> Result<Self, EmbedError> {
        let api_key = entry
            .upstream_key()
            .map_err(|var| EmbedError::MissingApiKey {
                model: entry.name.clone(),
                var,
            })?;
        Self::new(entry, api_key)
    }

    /// Builds the embedder of a models-file entry with the given API key.
    pub fn new(entry: &ModelEntry, api_key: Option<SecretString>) -> Result<Self, EmbedError> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| EmbedError::Internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(OpenAiEmbedder {
            name: entry.name.clone(),
            url: format!("{}/embeddings", entry.base_url.trim_end_matches('/')),
            upstream_model: entry.upstream_model().to_owned(),
            api_key,
            client,
            dimension: AtomicUsize::new(entry.dimensions.unwrap_or(0)),
            max_tokens: usize::try_from(entry.context_length).unwrap_or(usize::MAX),
            batch_size: DEFAULT_BATCH_SIZE,
        })
    }

    /// Sets how many texts go into one upstream request (default 64).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// The vector size, asking the upstream (one short text) when neither the models file
    /// nor an earlier answer told it.
    pub async fn probe_dimension(&self) -> Result<usize, EmbedError> {
        let known = self.dimension.load(Ordering::Relaxed);
        if known > 0 {
            return Ok(known);
        }
        self.embed(&["dimension probe".to_owned()]).await?;
        Ok(self.dimension.load(Ordering::Relaxed))
    }

    fn upstream_error(&self, message: impl Into<String>) -> EmbedError {
        EmbedError::InvalidResponse {
            model: self.name.clone(),
            message: message.into(),
        }
    }

    async fn request(&self, input: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let start = std::time::Instant::now();
        let result = self.request_once(input).await;
        docchat_common::metrics::model_request(
            &self.name,
            "embed",
            result.is_ok(),
            start.elapsed(),
        );
        result
    }

    async fn request_once(&self, input: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut req = self
            .client
            .post(&self.url)
            .headers(crate::trace_headers())
            .json(&EmbeddingsRequest {
                model: &self.upstream_model,
                input,
            });
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose_secret());
        }
        let resp = req.send().await.map_err(|e| EmbedError::Transport {
            model: self.name.clone(),
            message: e.to_string(),
        })?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| EmbedError::Transport {
            model: self.name.clone(),
            message: e.to_string(),
        })?;
        if !status.is_success() {
            let message = match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(ErrorBody {
                    error: ErrorDetail::Object { message } | ErrorDetail::Text(message),
                }) => message,
                Err(_) => String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned(),
            };
            return Err(EmbedError::Upstream {
                model: self.name.clone(),
                status: status.as_u16(),
                message,
            });
        }
        let parsed: EmbeddingsResponse = serde_json::from_slice(&body)
            .map_err(|e| self.upstream_error(format!("not an embeddings answer: {e}")))?;
        if parsed.data.len() != input.len() {
            return Err(self.upstream_error(format!(
                "{} embeddings for {} inputs",
                parsed.data.len(),
                input.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; input.len()];
        for (pos, item) in parsed.data.into_iter().enumerate() {
            let i = item.index.unwrap_or(pos);
            let slot = out
                .get_mut(i)
                .ok_or_else(|| self.upstream_error(format!("index {i} out of range")))?;
            if slot.replace(item.embedding).is_some() {
                return Err(self.upstream_error(format!("index {i} answered twice")));
            }
        }
        let mut vectors = Vec::with_capacity(out.len());
        for v in out {
            let mut v = v.ok_or_else(|| self.upstream_error("an input got no embedding"))?;
            self.check_dimension(v.len())?;
            l2_normalize(&mut v);
            vectors.push(v);
        }
        Ok(vectors)
    }

    fn check_dimension(&self, len: usize) -> Result<(), EmbedError> {
        if len == 0 {
            return Err(self.upstream_error("an empty embedding"));
        }
        match self
            .dimension
            .compare_exchange(0, len, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(known) if known == len => Ok(()),
            Err(known) => Err(self.upstream_error(format!(
                "an embedding of {len} dimensions, expected {known}"
            ))),
        }
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    /// 0 until known (see [`OpenAiEmbedder::probe_dimension`]).
    fn dimension(&self) -> usize {
        self.dimension.load(Ordering::Relaxed)
    }

    /// The entry's `context_length`.
    fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// An estimate, since the upstream's tokenizer is not known here: one token per three
    /// bytes of UTF-8, which over-counts English (about four characters a token) and
    /// matches scripts of three-byte characters, so chunks sized by it fit.
    fn count_tokens(&self, text: &str) -> usize {
        text.len().div_ceil(3)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size) {
            out.extend(self.request(chunk).await?);
        }
        Ok(out)
    }
}
