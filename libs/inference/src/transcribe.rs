//! Speech to text through any OpenAI-compatible `/v1/audio/transcriptions` upstream
//! (`kind = "transcription"` in the models file), asking for `verbose_json` segments.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::registry::ModelEntry;

#[derive(Debug, thiserror::Error)]
pub enum TranscribeError {
    #[error("the transcription upstream's key variable {0} is not set")]
    MissingKey(String),
    #[error("cannot reach the transcription upstream: {0}")]
    Unreachable(String),
    #[error("the transcription upstream answered {status}: {message}")]
    Upstream { status: u16, message: String },
    #[error("the transcription upstream's answer is not verbose JSON: {0}")]
    Malformed(String),
}

/// One timed piece of speech.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechSegment {
    pub start: f64,
    pub end: Option<f64>,
    /// The upstream's diarization label, when it gives one.
    pub speaker: Option<String>,
    pub text: String,
}

/// A transcription and the tokens the upstream reports for it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transcript {
    pub segments: Vec<SpeechSegment>,
    /// `usage.input_tokens` (upstreams that bill by tokens report it; 0 otherwise).
    pub prompt_tokens: u64,
    /// `usage.output_tokens`, as above.
    pub completion_tokens: u64,
}

#[derive(Deserialize)]
struct Verbose {
    #[serde(default)]
    text: String,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    segments: Vec<VerboseSegment>,
    #[serde(default)]
    usage: Option<Usage>,
}

/// OpenAI's `usage` of a transcription: tokens (`type: "tokens"`) or a duration in
/// seconds (`type: "duration"`), which the models file's per-token prices cannot price.
#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

#[derive(Deserialize)]
struct VerboseSegment {
    start: f64,
    #[serde(default)]
    end: Option<f64>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    speaker: Option<String>,
}

pub struct Transcriber {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<SecretString>,
}

impl Transcriber {
    pub fn from_entry(entry: &ModelEntry) -> Result<Transcriber, TranscribeError> {
        let api_key = entry.upstream_key().map_err(TranscribeError::MissingKey)?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(3600))
            .build()
            .map_err(|e| TranscribeError::Unreachable(e.to_string()))?;
        Ok(Transcriber {
            client,
            url: format!(
                "{}/audio/transcriptions",
                entry.base_url.trim_end_matches('/')
            ),
            model: entry.upstream_model().to_owned(),
            api_key,
        })
    }

    /// Transcribes a whole file into timed segments.
    pub async fn transcribe(
        &self,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<Transcript, TranscribeError> {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned());
        let form = reqwest::multipart::Form::new()
            .part("file", part)
            .text("model", self.model.clone())
            .text("response_format", "verbose_json")
            .text("timestamp_granularities[]", "segment");
        let mut request = self.client.post(&self.url).multipart(form);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| TranscribeError::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| TranscribeError::Unreachable(e.to_string()))?;
        if !(200..300).contains(&status) {
            let message: String = body.chars().take(200).collect();
            return Err(TranscribeError::Upstream { status, message });
        }
        let verbose: Verbose =
            serde_json::from_str(&body).map_err(|e| TranscribeError::Malformed(e.to_string()))?;
        let usage = verbose.usage.unwrap_or_default();
        let segments = if verbose.segments.is_empty() {
            // A server without segment timestamps still gives the text: one segment.
            if verbose.text.trim().is_empty() {
                Vec::new()
            } else {
                vec![SpeechSegment {
                    start: 0.0,
                    end: verbose.duration,
                    speaker: None,
                    text: verbose.text.trim().to_owned(),
                }]
            }
        } else {
            verbose
                .segments
                .into_iter()
                .map(|s| SpeechSegment {
                    start: s.start,
                    end: s.end,
                    speaker: s.speaker.filter(|v| !v.trim().is_empty()),
                    text: s.text.trim().to_owned(),
                })
                .collect()
        };
        Ok(Transcript {
            segments,
            prompt_tokens: usage.input_tokens,
            completion_tokens: usage.output_tokens,
        })
    }
}
