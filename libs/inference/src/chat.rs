//! Chat models behind OpenAI-compatible `/v1/chat/completions` upstreams. This first part
//! is a plain (non-streaming) completion, used by ingestion for descriptions and summaries;
//! streaming, tool calls and local GGUF models extend it with the completions work.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::registry::{ModelEntry, Registry};

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("the model's key variable {0} is not set")]
    MissingKey(String),
    #[error("cannot reach the model: {0}")]
    Unreachable(String),
    #[error("the model answered {status}: {message}")]
    Upstream { status: u16, message: String },
    #[error("the model's answer is malformed: {0}")]
    Malformed(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "system".into(),
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// A finished completion with its token counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    max_tokens: u32,
    temperature: f32,
    stream: bool,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChatMessage,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// One OpenAI-compatible chat model.
pub struct OpenAiChat {
    client: reqwest::Client,
    url: String,
    model: String,
    name: String,
    api_key: Option<SecretString>,
}

impl OpenAiChat {
    pub fn from_entry(entry: &ModelEntry) -> Result<OpenAiChat, ChatError> {
        let api_key = match &entry.api_key_env {
            Some(var) => Some(SecretString::from(
                std::env::var(var).map_err(|_| ChatError::MissingKey(var.clone()))?,
            )),
            None => None,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| ChatError::Unreachable(e.to_string()))?;
        Ok(OpenAiChat {
            client,
            url: format!("{}/chat/completions", entry.base_url.trim_end_matches('/')),
            model: entry.upstream_model().to_owned(),
            name: entry.name.clone(),
            api_key,
        })
    }

    /// The registry name of the model.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The default chat model of `registry` (the target of `auto`), if any.
    pub fn default_of(registry: &Registry) -> Result<Option<OpenAiChat>, ChatError> {
        registry
            .default_chat_model()
            .map(OpenAiChat::from_entry)
            .transpose()
    }

    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<Completion, ChatError> {
        let body = Request {
            model: &self.model,
            messages,
            max_tokens,
            temperature,
            stream: false,
        };
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| ChatError::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| ChatError::Unreachable(e.to_string()))?;
        if !(200..300).contains(&status) {
            return Err(ChatError::Upstream {
                status,
                message: text.chars().take(200).collect(),
            });
        }
        let parsed: Response =
            serde_json::from_str(&text).map_err(|e| ChatError::Malformed(e.to_string()))?;
        let usage = parsed.usage.unwrap_or_default();
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ChatError::Malformed("no choices".into()))?;
        Ok(Completion {
            text: choice.message.content.trim().to_owned(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        })
    }
}
