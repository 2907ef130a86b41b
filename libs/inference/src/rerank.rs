//! Rerankers: the second stage of retrieval, a cross-encoder that reads the query and each
//! passage together and scores how well the passage answers it (`kind = "rerank"` in the
//! models file, or `DOCCHAT_RERANK_URL`).
//!
//! One call shape serves Hugging Face's text-embeddings-inference, vLLM, Infinity, Jina and
//! Cohere: `POST {base_url}/rerank` with `{"model", "query", "documents": [str], "top_n"}`.
//! A server that answers that path 404 or 405 is asked at `{base_url}/v1/rerank` instead
//! (Cohere's and Jina's path when `base_url` is the host's root), and the path that worked
//! is kept. Answers are `{"results": [{"index", "relevance_score"}]}` (Cohere, Jina, vLLM,
//! Infinity) or TEI's bare `[{"index", "score"}]`; both are read. More documents than the
//! entry's `max_documents` go in several calls, whose scores are comparable (one model).
//!
//! Usage: `usage.total_tokens` (or `prompt_tokens`) when the upstream reports it, else an
//! estimate of 4 bytes a token over the query once per document and the documents; priced
//! at the entry's `input_price` per million tokens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use crate::registry::ModelEntry;

#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error("the reranker's key variable {0} is not set")]
    MissingKey(String),
    #[error("cannot reach the reranker: {0}")]
    Unreachable(String),
    #[error("the reranker did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the reranker answered {status}: {message}")]
    Upstream { status: u16, message: String },
    #[error("the reranker's answer is not a rerank result: {0}")]
    Malformed(String),
}

/// What a rerank call found: every document's score, and what it used.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranked {
    /// (index into the documents, relevance), best first (ties: the earlier document).
    pub scores: Vec<(usize, f64)>,
    /// Tokens the calls used (reported, or estimated).
    pub tokens: u64,
    /// What they cost at the entry's input price.
    pub cost: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Results {
        results: Vec<Scored>,
        #[serde(default)]
        usage: Option<Usage>,
    },
    Bare(Vec<Scored>),
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    #[serde(alias = "score")]
    relevance_score: f64,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    total_tokens: u64,
    #[serde(default)]
    prompt_tokens: u64,
}

/// A reranker upstream, ready to call.
pub struct Reranker {
    client: reqwest::Client,
    base: String,
    model: String,
    name: String,
    api_key: Option<SecretString>,
    max_documents: usize,
    input_price: f64,
    /// `{base}/rerank` answered 404 or 405 once: `{base}/v1/rerank` is used.
    versioned: AtomicBool,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("name", &self.name)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Documents per call when the entry sets no `max_documents`.
const DEFAULT_MAX_DOCUMENTS: usize = 100;

impl Reranker {
    /// The reranker `config` and `registry` name: the models file's `kind = "rerank"` entry
    /// (the default one, else the first), else `DOCCHAT_RERANK_URL`; `None` without either.
    pub fn configured(
        config: &docchat_common::Config,
        registry: &crate::Registry,
    ) -> Option<Result<Reranker, RerankError>> {
        if let Some(entry) = registry.rerank_model() {
            return Some(Reranker::from_entry(entry));
        }
        let url = config
            .rerank_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())?;
        let entry = ModelEntry {
            name: "rerank".to_owned(),
            display_name: None,
            provider: "openai".to_owned(),
            base_url: url.to_owned(),
            upstream_model: config.rerank_model.clone().filter(|m| !m.trim().is_empty()),
            api_key_env: None,
            api_key: config
                .rerank_api_key
                .as_ref()
                .filter(|k| !k.expose_secret().trim().is_empty())
                .map(|k| crate::ApiKey(k.clone())),
            base_model: None,
            context_length: 512,
            input_price: 0.0,
            output_price: 0.0,
            vision: false,
            reasoning: false,
            tools: false,
            default: true,
            kind: crate::ModelKind::Rerank,
            dimensions: None,
            max_documents: None,
            local_path: None,
        };
        Some(Reranker::from_entry(&entry))
    }

    pub fn from_entry(entry: &ModelEntry) -> Result<Reranker, RerankError> {
        let api_key = entry.upstream_key().map_err(RerankError::MissingKey)?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| RerankError::Unreachable(e.to_string()))?;
        Ok(Reranker {
            client,
            base: entry.base_url.trim_end_matches('/').to_owned(),
            model: entry.upstream_model().to_owned(),
            name: entry.name.clone(),
            api_key,
            max_documents: entry
                .max_documents
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_MAX_DOCUMENTS),
            input_price: entry.input_price,
            versioned: AtomicBool::new(false),
        })
    }

    /// The models-file name of the reranker (what its usage is booked as).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Scores every document for `query`, within `budget` for all the calls together.
    pub async fn rerank(
        &self,
        query: &str,
        documents: &[String],
        budget: Duration,
    ) -> Result<Reranked, RerankError> {
        let work = async {
            let mut scores = Vec::with_capacity(documents.len());
            let mut tokens = 0;
            for (batch, docs) in documents.chunks(self.max_documents).enumerate() {
                let (found, used) = self.call(query, docs).await?;
                let offset = batch * self.max_documents;
                scores.extend(found.into_iter().map(|(i, s)| (offset + i, s)));
                tokens += used;
            }
            Ok::<_, RerankError>((scores, tokens))
        };
        let (mut scores, tokens) = tokio::time::timeout(budget, work)
            .await
            .map_err(|_| RerankError::Timeout(budget))??;
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(Reranked {
            scores,
            tokens,
            cost: tokens as f64 * self.input_price / 1_000_000.0,
        })
    }

    /// One call: (index within `docs`, score) for each document, and the tokens used.
    async fn call(
        &self,
        query: &str,
        docs: &[String],
    ) -> Result<(Vec<(usize, f64)>, u64), RerankError> {
        let start = std::time::Instant::now();
        let result = self.call_once(query, docs).await;
        docchat_common::metrics::model_request(
            &self.name,
            "rerank",
            result.is_ok(),
            start.elapsed(),
        );
        result
    }

    async fn call_once(
        &self,
        query: &str,
        docs: &[String],
    ) -> Result<(Vec<(usize, f64)>, u64), RerankError> {
        let body = json!({
            "model": self.model,
            "query": query,
            "documents": docs,
            "top_n": docs.len(),
        });
        let mut versioned = self.versioned.load(Ordering::Relaxed);
        let (status, text) = loop {
            let path = if versioned { "/v1/rerank" } else { "/rerank" };
            let mut request = self
                .client
                .post(format!("{}{path}", self.base))
                .headers(crate::trace_headers())
                .json(&body);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key.expose_secret());
            }
            let response = request
                .send()
                .await
                .map_err(|e| RerankError::Unreachable(e.to_string()))?;
            let status = response.status().as_u16();
            if matches!(status, 404 | 405) && !versioned {
                versioned = true;
                continue;
            }
            let text = response
                .text()
                .await
                .map_err(|e| RerankError::Unreachable(e.to_string()))?;
            break (status, text);
        };
        if !(200..300).contains(&status) {
            let message: String = text.chars().take(200).collect();
            return Err(RerankError::Upstream { status, message });
        }
        if versioned {
            self.versioned.store(true, Ordering::Relaxed);
        }
        let answer: Answer =
            serde_json::from_str(&text).map_err(|e| RerankError::Malformed(e.to_string()))?;
        let (results, usage) = match answer {
            Answer::Results { results, usage } => (results, usage),
            Answer::Bare(results) => (results, None),
        };
        let mut seen = vec![false; docs.len()];
        let mut scores = Vec::with_capacity(results.len());
        for r in results {
            if r.index >= docs.len() || std::mem::replace(&mut seen[r.index], true) {
                return Err(RerankError::Malformed(format!(
                    "index {} is out of range or repeated",
                    r.index
                )));
            }
            if !r.relevance_score.is_finite() {
                return Err(RerankError::Malformed("a score is not a number".into()));
            }
            scores.push((r.index, r.relevance_score));
        }
        if scores.len() != docs.len() {
            return Err(RerankError::Malformed(format!(
                "{} of {} documents scored",
                scores.len(),
                docs.len()
            )));
        }
        let reported = usage.map_or(0, |u| u.total_tokens.max(u.prompt_tokens));
        let tokens = if reported > 0 {
            reported
        } else {
            let bytes: usize = docs.iter().map(|d| d.len() + query.len()).sum();
            (bytes as u64).div_ceil(4)
        };
        Ok((scores, tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_answer_shapes_are_read() {
        let cohere: Answer = serde_json::from_str(
            r#"{"id":"x","results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":0.1}],"usage":{"total_tokens":12}}"#,
        )
        .unwrap();
        assert!(matches!(cohere, Answer::Results { ref results, .. } if results.len() == 2));
        let tei: Answer =
            serde_json::from_str(r#"[{"index":0,"score":0.5},{"index":1,"score":0.7}]"#).unwrap();
        match tei {
            Answer::Bare(r) => assert_eq!(r[1].relevance_score, 0.7),
            Answer::Results { .. } => panic!("TEI's answer is a bare list"),
        }
    }
}
