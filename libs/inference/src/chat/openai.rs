//! The OpenAI-compatible provider: a plain completion (descriptions, summaries, HyDE drafts)
//! and a token stream over Server-Sent Events (answers) from `/v1/chat/completions`. Both
//! retry an upstream 429/5xx or a refused connection with backoff, but only before the first
//! token; dropping a [`ChatStream`] closes the upstream connection.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{
    ChatError, ChatMessage, ChatStream, Completion, EventSource, Sampling, StreamEvent, ToolCall,
    ToolChoice, ToolSpec, Tools,
};
use crate::registry::{ModelEntry, Registry};

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
    #[serde(skip_serializing_if = "<[ToolSpec]>::is_empty")]
    tools: &'a [ToolSpec],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
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
        let api_key = entry.upstream_key().map_err(ChatError::MissingKey)?;
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
            let mut request = self
                .client
                .post(&self.url)
                .json(body)
                .headers(crate::trace_headers());
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
                Err(e) => transport(e),
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
            tools: &[],
            tool_choice: None,
            parallel_tool_calls: None,
        };
        let text = self.send(&body).await?.text().await.map_err(transport)?;
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
        self.stream_tools(messages, sampling, &Tools::default())
            .await
    }

    /// A streamed completion that may call `tools`: text arrives as deltas, the calls are
    /// assembled from their fragments and read with
    /// [`ChatStream::take_tool_calls`] once the stream has ended.
    pub async fn stream_tools(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
        tools: &Tools,
    ) -> Result<ChatStream, ChatError> {
        let offered = !tools.tools.is_empty();
        let body = Request {
            model: &self.model,
            messages,
            max_tokens: sampling.max_tokens,
            temperature: sampling.temperature,
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
            }),
            tools: &tools.tools,
            tool_choice: offered.then_some(&tools.choice),
            parallel_tool_calls: tools.parallel.filter(|_| offered),
        };
        let response = self.send(&body).await?;
        let prompt_chars: usize = messages
            .iter()
            .map(|m| {
                m.content.len()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.arguments.len())
                        .sum::<usize>()
            })
            .sum();
        Ok(ChatStream::new(Box::new(SseStream {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
            done: false,
            usage: None,
            finish_reason: None,
            prompt_chars,
            completion_chars: 0,
            calls: std::collections::BTreeMap::new(),
        })))
    }
}

type ByteStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An answer streamed as Server-Sent Events.
struct SseStream {
    body: ByteStream,
    buffer: Vec<u8>,
    done: bool,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    prompt_chars: usize,
    completion_chars: usize,
    /// Tool calls being assembled, by `index`.
    calls: std::collections::BTreeMap<u32, ToolCall>,
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
    #[serde(default)]
    tool_calls: Option<Vec<CallFragment>>,
}

/// A piece of a streamed tool call: `id` and `name` come in the first fragment of an
/// `index`, `arguments` in pieces to be concatenated.
#[derive(Deserialize)]
struct CallFragment {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[async_trait::async_trait]
impl EventSource for SseStream {
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
                        let Some(delta) = choice.delta else {
                            continue;
                        };
                        for fragment in delta.tool_calls.unwrap_or_default() {
                            self.add_fragment(fragment);
                        }
                        if let Some(content) = delta.content {
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
                    return Some(Err(if e.is_timeout() {
                        ChatError::Timeout(e.to_string())
                    } else {
                        ChatError::Unreachable(format!("the model's stream broke off: {e}"))
                    }));
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

    fn finish_reason(&self) -> &str {
        self.finish_reason.as_deref().unwrap_or("stop")
    }

    fn take_tool_calls(&mut self) -> Result<Vec<ToolCall>, ChatError> {
        let calls = std::mem::take(&mut self.calls);
        let mut out = Vec::with_capacity(calls.len());
        for (index, mut call) in calls {
            if call.name.is_empty() {
                return Err(ChatError::Malformed(format!(
                    "tool call {index} has no function name"
                )));
            }
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
            out.push(call);
        }
        Ok(out)
    }
}

impl SseStream {
    fn add_fragment(&mut self, fragment: CallFragment) {
        let call = self.calls.entry(fragment.index).or_default();
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                // Some upstreams repeat the name in every fragment: keep the first.
                if call.name.is_empty() {
                    call.name = name;
                }
            }
            if let Some(arguments) = function.arguments {
                self.completion_chars += arguments.len();
                call.arguments.push_str(&arguments);
            }
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

/// A failed request or body read: a timeout, or an upstream that cannot be reached.
fn transport(e: reqwest::Error) -> ChatError {
    if e.is_timeout() {
        ChatError::Timeout(e.to_string())
    } else {
        ChatError::Unreachable(e.to_string())
    }
}
