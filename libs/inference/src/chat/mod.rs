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
    #[error("the model did not answer in time: {0}")]
    Timeout(String),
    #[error("the model answered {status}: {message}")]
    Upstream { status: u16, message: String },
    #[error("the model's answer is malformed: {0}")]
    Malformed(String),
    /// A local model failed to load or to run (or the prompt does not fit its context).
    #[error("local model: {0}")]
    Local(String),
    /// Tools were offered to a model that cannot call them.
    #[error("model {0} cannot call tools")]
    ToolsUnsupported(String),
}

/// One message of a conversation. `tool_calls` are an assistant's requests to run tools
/// (its `content` may then be empty); a `tool` message answers one of them by
/// `tool_call_id`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// Image URLs (`https:` or `data:`) that go with `content`, for vision models. A message
    /// with images is sent as content parts, one without as plain text.
    pub images: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

impl Serialize for ChatMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("ChatMessage", 4)?;
        m.serialize_field("role", &self.role)?;
        if !self.images.is_empty() {
            let text = (!self.content.is_empty())
                .then(|| serde_json::json!({"type": "text", "text": self.content}));
            let images = self
                .images
                .iter()
                .map(|url| serde_json::json!({"type": "image_url", "image_url": {"url": url}}));
            let parts: Vec<serde_json::Value> = text.into_iter().chain(images).collect();
            m.serialize_field("content", &parts)?;
        } else if self.content.is_empty() && !self.tool_calls.is_empty() {
            m.serialize_field("content", &None::<String>)?;
        } else {
            m.serialize_field("content", &self.content)?;
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<WireToolCall> = self.tool_calls.iter().map(WireToolCall::from).collect();
            m.serialize_field("tool_calls", &calls)?;
        }
        if let Some(id) = &self.tool_call_id {
            m.serialize_field("tool_call_id", id)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            role: String,
            #[serde(default)]
            content: Option<String>,
            #[serde(default)]
            tool_calls: Option<Vec<WireToolCall>>,
            #[serde(default)]
            tool_call_id: Option<String>,
        }
        let w = Wire::deserialize(d)?;
        Ok(ChatMessage {
            role: w.role,
            content: w.content.unwrap_or_default(),
            images: Vec::new(),
            tool_calls: w
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .map(|c| ToolCall {
                    id: c.id,
                    name: c.function.name,
                    arguments: c.function.arguments,
                })
                .collect(),
            tool_call_id: w.tool_call_id,
        })
    }
}

impl ChatMessage {
    fn of(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage::of("system", content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::of("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage::of("assistant", content)
    }

    /// An assistant turn that asked for tools (with whatever text came before the calls).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        ChatMessage {
            tool_calls: calls,
            ..ChatMessage::of("assistant", content)
        }
    }

    /// The result of the tool call `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            tool_call_id: Some(call_id.into()),
            ..ChatMessage::of("tool", content)
        }
    }
}

/// A tool call the model asked for: `arguments` is the JSON text as the model wrote it
/// (not necessarily valid JSON; the caller validates).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Serialize, Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: WireFunction,
}

#[derive(Serialize, Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

fn function_type() -> String {
    "function".into()
}

impl From<&ToolCall> for WireToolCall {
    fn from(c: &ToolCall) -> Self {
        WireToolCall {
            id: c.id.clone(),
            kind: function_type(),
            function: WireFunction {
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        }
    }
}

/// A tool offered to the model: `parameters` is its arguments' JSON schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

impl Serialize for ToolSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
        .serialize(s)
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool: text only.
    None,
    /// At least one tool.
    Required,
    /// This function.
    Function(String),
}

impl Serialize for ToolChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}}).serialize(s)
            }
        }
    }
}

/// The tools of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tools {
    pub tools: Vec<ToolSpec>,
    pub choice: ToolChoice,
    /// `parallel_tool_calls`; `None` leaves it to the upstream.
    pub parallel: Option<bool>,
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
    /// The tool calls of the answer, assembled (final once `next` returned `None`).
    fn take_tool_calls(&mut self) -> Result<Vec<ToolCall>, ChatError> {
        Ok(Vec::new())
    }
}

/// A streamed answer. Dropping it closes the upstream connection, which cancels the
/// generation upstream, or the channel from a local model's worker, which stops it.
pub struct ChatStream {
    source: Box<dyn EventSource>,
    /// Records the request when the stream ends (see [`ChatStream::metered`]).
    meter: Option<Meter>,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream").finish_non_exhaustive()
    }
}

impl ChatStream {
    pub fn new(source: Box<dyn EventSource>) -> ChatStream {
        ChatStream {
            source,
            meter: None,
        }
    }

    /// The next piece of the answer; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
        let next = self.source.next().await;
        match &next {
            Some(Ok(_)) => {}
            None => self.record(None),
            Some(Err(e)) => self.record(Some(e)),
        }
        next
    }

    /// Records a metered stream's request once: at its end, its first error or its drop.
    fn record(&mut self, error: Option<&ChatError>) {
        if let Some(meter) = self.meter.take() {
            docchat_common::metrics::model_request(
                &meter.model,
                "chat",
                error.is_none(),
                meter.start.elapsed(),
            );
            let (prompt, completion) = self.source.usage();
            meter
                .span
                .record("gen_ai.usage.input_tokens", tokens(prompt));
            meter
                .span
                .record("gen_ai.usage.output_tokens", tokens(completion));
            if let Some(e) = error {
                meter.span.record("error", tracing::field::display(e));
            }
        }
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

    /// The tool calls the model asked for, assembled from their streamed fragments in
    /// `index` order; call once the stream has ended. A call without a name is malformed.
    pub fn take_tool_calls(&mut self) -> Result<Vec<ToolCall>, ChatError> {
        self.source.take_tool_calls()
    }

    /// This stream, recording one `chat` request of `model` in the model metrics and its
    /// token counts in `span` (which ends with it) when it ends, fails or is dropped
    /// unfinished. Kept beside the source rather than wrapped around it: a wrapper would
    /// cost every token another boxed call.
    pub(crate) fn metered(
        mut self,
        model: String,
        start: std::time::Instant,
        span: tracing::Span,
    ) -> ChatStream {
        self.meter = Some(Meter { model, start, span });
        self
    }
}

impl Drop for ChatStream {
    fn drop(&mut self) {
        // Dropped before its end: the reader stopped it, which is no upstream error.
        self.record(None);
    }
}

/// What a metered stream records at its end.
struct Meter {
    model: String,
    start: std::time::Instant,
    span: tracing::Span,
}

/// A token count as a span attribute: an integer (OpenTelemetry has no unsigned one, and a
/// `u64` would be exported as text).
pub(crate) fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docchat_common::metrics::sample;

    /// Yields `events`, then ends, counting 3 prompt and 2 completion tokens.
    struct Scripted(std::collections::VecDeque<Result<StreamEvent, ChatError>>);

    #[async_trait::async_trait]
    impl EventSource for Scripted {
        async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
            self.0.pop_front()
        }

        fn usage(&self) -> (u64, u64) {
            (3, 2)
        }

        fn finish_reason(&self) -> &str {
            "stop"
        }
    }

    fn stream(model: &str, events: Vec<Result<StreamEvent, ChatError>>) -> ChatStream {
        ChatStream::new(Box::new(Scripted(events.into()))).metered(
            model.into(),
            std::time::Instant::now(),
            tracing::Span::none(),
        )
    }

    fn requests(model: &str, outcome: &str) -> f64 {
        sample(
            "docchat_model_requests_total",
            &[("model", model), ("kind", "chat"), ("outcome", outcome)],
        )
    }

    #[tokio::test]
    async fn a_metered_stream_records_its_request_once_however_it_ends() {
        // Read to its end: one request, ok, recorded at the end (not again when dropped).
        let mut s = stream("read", vec![Ok(StreamEvent::Delta("a".into()))]);
        assert!(matches!(s.next().await, Some(Ok(_))));
        assert_eq!(requests("read", "ok"), 0.0, "not before its end");
        assert!(s.next().await.is_none());
        assert_eq!(requests("read", "ok"), 1.0);
        drop(s);
        assert_eq!(requests("read", "ok"), 1.0, "once");

        // An error from the upstream: one failed request.
        let mut s = stream("failing", vec![Err(ChatError::Malformed("x".into()))]);
        assert!(matches!(s.next().await, Some(Err(_))));
        drop(s);
        assert_eq!(requests("failing", "error"), 1.0);
        assert_eq!(requests("failing", "ok"), 0.0);

        // Dropped unfinished (the reader went away): ok, no upstream error.
        let s = stream("dropped", vec![Ok(StreamEvent::Delta("a".into()))]);
        drop(s);
        assert_eq!(requests("dropped", "ok"), 1.0);
        assert_eq!(
            sample(
                "docchat_model_request_duration_seconds",
                &[("model", "dropped"), ("kind", "chat")]
            ),
            1.0
        );

        // Not metered (a provider's stream before its model wraps it): nothing recorded.
        let all = || sample("docchat_model_requests_total", &[]);
        let before = all();
        let mut s = ChatStream::new(Box::new(Scripted(std::collections::VecDeque::new())));
        assert!(s.next().await.is_none());
        drop(s);
        assert_eq!(all(), before);
    }
}
