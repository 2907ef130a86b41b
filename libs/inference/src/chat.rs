//! Chat models behind OpenAI-compatible `/v1/chat/completions` upstreams: a plain
//! completion (descriptions, summaries, HyDE drafts) and a token stream over Server-Sent
//! Events (answers). Both retry an upstream 429/5xx or a refused connection with backoff, but
//! only before the first token; dropping a [`ChatStream`] closes the upstream connection.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::local::{LocalChat, LocalOptions};
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

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Attempts of a request that fails before its first token (429, 5xx, connection refused).
const ATTEMPTS: u32 = 3;
/// First backoff between attempts; doubled each time.
const BACKOFF: Duration = Duration::from_millis(200);

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
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

    /// Sends `body`, retrying 429/5xx answers and failed connections with backoff.
    async fn send(&self, body: &Request<'_>) -> Result<reqwest::Response, ChatError> {
        let mut delay = BACKOFF;
        let mut attempt = 1;
        loop {
            let mut request = self.client.post(&self.url).json(body);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key.expose_secret());
            }
            let failure = match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let text = response.text().await.unwrap_or_default();
                    ChatError::Upstream {
                        status,
                        message: text.chars().take(200).collect(),
                    }
                }
                Err(e) => ChatError::Unreachable(e.to_string()),
            };
            let retryable = match &failure {
                ChatError::Upstream { status, .. } => *status == 429 || *status >= 500,
                ChatError::Unreachable(_) => true,
                _ => false,
            };
            if !retryable || attempt >= ATTEMPTS {
                return Err(failure);
            }
            tracing::debug!(model = %self.name, attempt, error = %failure, "retrying the model");
            tokio::time::sleep(delay).await;
            delay *= 2;
            attempt += 1;
        }
    }

    /// A whole answer, trimmed.
    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<Completion, ChatError> {
        let mut done = self
            .complete_with(messages, Sampling::new(max_tokens, temperature))
            .await?;
        done.text = done.text.trim().to_owned();
        Ok(done)
    }

    /// A whole answer, as the model wrote it.
    pub async fn complete_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<Completion, ChatError> {
        let body = Request {
            model: &self.model,
            messages,
            max_tokens: sampling.max_tokens,
            temperature: sampling.temperature,
            stream: false,
            stream_options: None,
        };
        let text = self
            .send(&body)
            .await?
            .text()
            .await
            .map_err(|e| ChatError::Unreachable(e.to_string()))?;
        let parsed: Response =
            serde_json::from_str(&text).map_err(|e| ChatError::Malformed(e.to_string()))?;
        let usage = parsed.usage.unwrap_or_default();
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ChatError::Malformed("no choices".into()))?;
        Ok(Completion {
            text: choice.message.content,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            finish_reason: choice.finish_reason.unwrap_or_else(|| "stop".into()),
        })
    }
}

impl OpenAiChat {
    /// Starts a streamed completion. The upstream is asked for usage in its last chunk;
    /// without one, token counts are estimated.
    pub async fn stream(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<ChatStream, ChatError> {
        self.stream_with(messages, Sampling::new(max_tokens, temperature))
            .await
    }

    /// As [`stream`](Self::stream), leaving unset limits to the upstream.
    pub async fn stream_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<ChatStream, ChatError> {
        let body = Request {
            model: &self.model,
            messages,
            max_tokens: sampling.max_tokens,
            temperature: sampling.temperature,
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
            }),
        };
        let response = self.send(&body).await?;
        let prompt_chars: usize = messages.iter().map(|m| m.content.len()).sum();
        Ok(ChatStream {
            source: Source::Sse(SseStream {
                body: Box::pin(response.bytes_stream()),
                buffer: Vec::new(),
                done: false,
                usage: None,
                finish_reason: None,
                prompt_chars,
                completion_chars: 0,
            }),
        })
    }
}

/// What a stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The next piece of the answer.
    Delta(String),
}

type ByteStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A streamed answer. Dropping it closes the upstream connection, which cancels the
/// generation upstream, or the channel from a local model's worker, which stops it.
pub struct ChatStream {
    source: Source,
}

enum Source {
    Sse(SseStream),
    Channel(ChannelStream),
}

/// What a local model's worker sends.
pub(crate) enum StreamItem {
    Delta(String),
    Done {
        prompt_tokens: u64,
        completion_tokens: u64,
        /// It stopped at `max_tokens` or the end of the context.
        length: bool,
    },
    Failed(ChatError),
}

struct ChannelStream {
    rx: tokio::sync::mpsc::Receiver<StreamItem>,
    usage: (u64, u64),
    length: bool,
    done: bool,
}

impl ChatStream {
    /// A stream fed by a local model's worker.
    pub(crate) fn from_channel(rx: tokio::sync::mpsc::Receiver<StreamItem>) -> ChatStream {
        ChatStream {
            source: Source::Channel(ChannelStream {
                rx,
                usage: (0, 0),
                length: false,
                done: false,
            }),
        }
    }

    /// The next piece of the answer; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
        match &mut self.source {
            Source::Sse(s) => s.next().await,
            Source::Channel(c) => {
                if c.done {
                    return None;
                }
                match c.rx.recv().await {
                    Some(StreamItem::Delta(text)) => Some(Ok(StreamEvent::Delta(text))),
                    Some(StreamItem::Done {
                        prompt_tokens,
                        completion_tokens,
                        length,
                    }) => {
                        c.usage = (prompt_tokens, completion_tokens);
                        c.length = length;
                        c.done = true;
                        None
                    }
                    Some(StreamItem::Failed(e)) => {
                        c.done = true;
                        Some(Err(e))
                    }
                    None => {
                        c.done = true;
                        Some(Err(ChatError::Local(
                            "the model stopped before the end of its answer".into(),
                        )))
                    }
                }
            }
        }
    }

    /// (prompt, completion) tokens: the upstream's count, or an estimate (4 bytes a token)
    /// when it sent none; a local model's exact count once the stream has ended.
    pub fn usage(&self) -> (u64, u64) {
        match &self.source {
            Source::Sse(s) => s.usage(),
            Source::Channel(c) => c.usage,
        }
    }

    /// Why the answer ended (`stop` unless the model said otherwise); final once
    /// [`next`](Self::next) has returned `None`.
    pub fn finish_reason(&self) -> &str {
        match &self.source {
            Source::Sse(s) => s.finish_reason.as_deref().unwrap_or("stop"),
            Source::Channel(c) if c.length => "length",
            Source::Channel(_) => "stop",
        }
    }
}

/// An answer streamed as Server-Sent Events.
struct SseStream {
    body: ByteStream,
    buffer: Vec<u8>,
    done: bool,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    prompt_chars: usize,
    completion_chars: usize,
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<StreamChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

impl SseStream {
    async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
        use futures::StreamExt;
        loop {
            // One SSE event per blank-line-terminated block; only `data:` lines matter.
            while let Some(end) = find_event_end(&self.buffer) {
                let block: Vec<u8> = self.buffer.drain(..end.1).collect();
                let block = String::from_utf8_lossy(&block[..end.0]).into_owned();
                for line in block.lines() {
                    let Some(data) = line.strip_prefix("data:") else {
                        continue;
                    };
                    let data = data.trim();
                    if data == "[DONE]" {
                        self.done = true;
                        return None;
                    }
                    let chunk: StreamChunk = match serde_json::from_str(data) {
                        Ok(c) => c,
                        Err(e) => return Some(Err(ChatError::Malformed(e.to_string()))),
                    };
                    if let Some(usage) = chunk.usage {
                        self.usage = Some(usage);
                    }
                    let mut text = String::new();
                    for choice in chunk.choices {
                        if let Some(reason) = choice.finish_reason {
                            self.finish_reason = Some(reason);
                        }
                        if let Some(content) = choice.delta.and_then(|d| d.content) {
                            text.push_str(&content);
                        }
                    }
                    if !text.is_empty() {
                        self.completion_chars += text.len();
                        return Some(Ok(StreamEvent::Delta(text)));
                    }
                }
            }
            if self.done {
                return None;
            }
            match self.body.next().await {
                Some(Ok(bytes)) => self.buffer.extend_from_slice(&bytes),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(ChatError::Unreachable(format!(
                        "the model's stream broke off: {e}"
                    ))));
                }
                None => {
                    if self.buffer.iter().any(|b| !b.is_ascii_whitespace()) {
                        // A last event without its blank line.
                        self.buffer.extend_from_slice(b"\n\n");
                        continue;
                    }
                    self.done = true;
                    return Some(Err(ChatError::Unreachable(
                        "the model's stream ended before [DONE]".into(),
                    )));
                }
            }
        }
    }

    fn usage(&self) -> (u64, u64) {
        match &self.usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens),
            None => (
                (self.prompt_chars as u64).div_ceil(4),
                (self.completion_chars as u64).div_ceil(4),
            ),
        }
    }
}

/// (end of the event's text, end including its separator) of the first complete SSE event.
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// Any chat model docchat can call: an OpenAI-compatible upstream or a local GGUF model.
pub enum ChatModel {
    OpenAi(OpenAiChat),
    Local(LocalChat),
}

impl std::fmt::Debug for ChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatModel::OpenAi(m) => f.debug_tuple("OpenAi").field(&m.name).finish(),
            ChatModel::Local(m) => f.debug_tuple("Local").field(m).finish(),
        }
    }
}

impl ChatModel {
    /// The model of a registry entry: provider `local` runs in-process with `local`'s
    /// settings, anything else is an OpenAI-compatible upstream.
    pub fn from_entry(entry: &ModelEntry, local: &LocalOptions) -> Result<ChatModel, ChatError> {
        if entry.provider == "local" {
            LocalChat::from_entry(entry, local.clone()).map(ChatModel::Local)
        } else {
            OpenAiChat::from_entry(entry).map(ChatModel::OpenAi)
        }
    }

    /// The default chat model of `registry` (the target of `auto`), if any.
    pub fn default_of(
        registry: &Registry,
        local: &LocalOptions,
    ) -> Result<Option<ChatModel>, ChatError> {
        registry
            .default_chat_model()
            .map(|e| ChatModel::from_entry(e, local))
            .transpose()
    }

    /// The registry name of the model.
    pub fn name(&self) -> &str {
        match self {
            ChatModel::OpenAi(m) => m.name(),
            ChatModel::Local(m) => m.name(),
        }
    }

    /// A whole answer, trimmed.
    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<Completion, ChatError> {
        match self {
            ChatModel::OpenAi(m) => m.complete(messages, max_tokens, temperature).await,
            ChatModel::Local(m) => m.complete(messages, max_tokens, temperature).await,
        }
    }

    /// A whole answer as the model wrote it; unset limits are the model's defaults.
    pub async fn complete_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<Completion, ChatError> {
        match self {
            ChatModel::OpenAi(m) => m.complete_with(messages, sampling).await,
            ChatModel::Local(m) => {
                let (max_tokens, temperature) = local_sampling(sampling);
                m.complete(messages, max_tokens, temperature).await
            }
        }
    }

    /// As [`stream`](Self::stream); unset limits are the model's defaults.
    pub async fn stream_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<ChatStream, ChatError> {
        match self {
            ChatModel::OpenAi(m) => m.stream_with(messages, sampling).await,
            ChatModel::Local(m) => {
                let (max_tokens, temperature) = local_sampling(sampling);
                m.stream(messages, max_tokens, temperature).await
            }
        }
    }

    pub async fn stream(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<ChatStream, ChatError> {
        match self {
            ChatModel::OpenAi(m) => m.stream(messages, max_tokens, temperature).await,
            ChatModel::Local(m) => m.stream(messages, max_tokens, temperature).await,
        }
    }
}

fn local_sampling(sampling: Sampling) -> (u32, f32) {
    let (max_tokens, temperature) = Sampling::LOCAL_DEFAULT;
    (
        sampling.max_tokens.unwrap_or(max_tokens),
        sampling.temperature.unwrap_or(temperature),
    )
}
