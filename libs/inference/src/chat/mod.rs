//! Chat models: the wire types every provider shares (messages, completions, sampling, the
//! streamed answer and the [`EventSource`] trait a provider's stream implements) at the bottom;
//! the providers above them — [`openai`] (any OpenAI-compatible `/v1/chat/completions`
//! upstream) and [`local`] (GGUF files run in-process) — and [`ChatModel`], which picks one
//! for a registry entry. Nothing here imports a provider except [`model`].

pub mod local;
mod model;
mod openai;

pub use model::ChatModel;
pub use openai::OpenAiChat;

use serde::{Deserialize, Serialize};

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
    /// A local model failed to load or to run (or the prompt does not fit its context).
    #[error("local model: {0}")]
    Local(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// Image URLs (`https:` or `data:`) that go with `content`, for vision models. A message
    /// with images is sent as content parts, one without as plain text.
    #[serde(skip)]
    pub images: Vec<String>,
}

impl Serialize for ChatMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("ChatMessage", 2)?;
        m.serialize_field("role", &self.role)?;
        if self.images.is_empty() {
            m.serialize_field("content", &self.content)?;
        } else {
            let text = (!self.content.is_empty())
                .then(|| serde_json::json!({"type": "text", "text": self.content}));
            let images = self
                .images
                .iter()
                .map(|url| serde_json::json!({"type": "image_url", "image_url": {"url": url}}));
            let parts: Vec<serde_json::Value> = text.into_iter().chain(images).collect();
            m.serialize_field("content", &parts)?;
        }
        m.end()
    }
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "system".into(),
            content: content.into(),
            images: Vec::new(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "user".into(),
            content: content.into(),
            images: Vec::new(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "assistant".into(),
            content: content.into(),
            images: Vec::new(),
        }
    }
}

/// A finished completion with its token counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Why the model stopped: `stop`, `length`, or what the upstream said.
    pub finish_reason: String,
}

/// Generation limits of one call; `None` leaves the choice to the model (an upstream's own
/// default, or [`Sampling::LOCAL_DEFAULT`] for a local model).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sampling {
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

impl Sampling {
    /// What a local model uses for an unset field: the vendor API's temperature default
    /// and the main API's `max_new_tokens` default.
    pub const LOCAL_DEFAULT: (u32, f32) = (1536, 1.0);

    pub fn new(max_tokens: u32, temperature: f32) -> Sampling {
        Sampling {
            max_tokens: Some(max_tokens),
            temperature: Some(temperature),
        }
    }
}

/// What a stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The next piece of the answer.
    Delta(String),
}

/// What a provider's streamed answer implements; [`ChatStream`] wraps one.
#[async_trait::async_trait]
pub trait EventSource: Send {
    /// The next piece of the answer; `None` at its end.
    async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>>;
    /// (prompt, completion) tokens so far (final once `next` returned `None`).
    fn usage(&self) -> (u64, u64);
    /// Why the answer ended; final once `next` returned `None`.
    fn finish_reason(&self) -> &str;
}

/// A streamed answer. Dropping it closes the upstream connection, which cancels the
/// generation upstream, or the channel from a local model's worker, which stops it.
pub struct ChatStream {
    source: Box<dyn EventSource>,
}

impl ChatStream {
    pub fn new(source: Box<dyn EventSource>) -> ChatStream {
        ChatStream { source }
    }

    /// The next piece of the answer; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
        self.source.next().await
    }

    /// (prompt, completion) tokens: the upstream's count, or an estimate (4 bytes a token)
    /// when it sent none; a local model's exact count once the stream has ended.
    pub fn usage(&self) -> (u64, u64) {
        self.source.usage()
    }

    /// Why the answer ended (`stop` unless the model said otherwise); final once
    /// [`next`](Self::next) has returned `None`.
    pub fn finish_reason(&self) -> &str {
        self.source.finish_reason()
    }
}
