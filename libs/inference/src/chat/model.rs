//! [`ChatModel`]: the provider of a registry entry, behind one set of calls.

use std::time::Instant;

use docchat_common::metrics;
use tracing::Instrument;

use super::local::{LocalChat, LocalOptions};
use super::tokens;
use super::{ChatError, ChatMessage, ChatStream, Completion, OpenAiChat, Sampling, Tools};
use crate::registry::{ModelEntry, Registry};

/// Any chat model docchat can call: an OpenAI-compatible upstream or a local GGUF model.
pub enum ChatModel {
    OpenAi(OpenAiChat),
    Local(LocalChat),
}

impl std::fmt::Debug for ChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatModel::OpenAi(m) => f.debug_tuple("OpenAi").field(&m.name()).finish(),
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
        let start = Instant::now();
        let span = self.span();
        let result = match self {
            ChatModel::OpenAi(m) => {
                m.complete(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
            ChatModel::Local(m) => {
                m.complete(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
        };
        self.completed(&result, start, &span);
        result
    }

    /// A whole answer as the model wrote it; unset limits are the model's defaults.
    pub async fn complete_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<Completion, ChatError> {
        let start = Instant::now();
        let span = self.span();
        let result = match self {
            ChatModel::OpenAi(m) => {
                m.complete_with(messages, sampling)
                    .instrument(span.clone())
                    .await
            }
            ChatModel::Local(m) => {
                let (max_tokens, temperature) = local_sampling(sampling);
                m.complete(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
        };
        self.completed(&result, start, &span);
        result
    }

    /// As [`stream`](Self::stream); unset limits are the model's defaults.
    pub async fn stream_with(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
    ) -> Result<ChatStream, ChatError> {
        let start = Instant::now();
        let span = self.span();
        let result = match self {
            ChatModel::OpenAi(m) => {
                m.stream_with(messages, sampling)
                    .instrument(span.clone())
                    .await
            }
            ChatModel::Local(m) => {
                let (max_tokens, temperature) = local_sampling(sampling);
                m.stream(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
        };
        self.metered(result, start, span)
    }

    /// Whether the model can be offered tools: an upstream the models file marks
    /// `tools = true`; never a local model.
    pub fn calls_tools(entry: &ModelEntry) -> bool {
        entry.tools && entry.provider != "local"
    }

    /// A streamed answer that may call `tools` (see [`OpenAiChat::stream_tools`]); a local
    /// model answers [`ChatError::ToolsUnsupported`].
    pub async fn stream_tools(
        &self,
        messages: &[ChatMessage],
        sampling: Sampling,
        tools: &Tools,
    ) -> Result<ChatStream, ChatError> {
        let m = match self {
            ChatModel::OpenAi(m) => m,
            ChatModel::Local(m) => return Err(ChatError::ToolsUnsupported(m.name().to_owned())),
        };
        let start = Instant::now();
        let span = self.span();
        let result = m
            .stream_tools(messages, sampling, tools)
            .instrument(span.clone())
            .await;
        self.metered(result, start, span)
    }

    pub async fn stream(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<ChatStream, ChatError> {
        let start = Instant::now();
        let span = self.span();
        let result = match self {
            ChatModel::OpenAi(m) => {
                m.stream(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
            ChatModel::Local(m) => {
                m.stream(messages, max_tokens, temperature)
                    .instrument(span.clone())
                    .await
            }
        };
        self.metered(result, start, span)
    }

    /// The span of one call: OpenTelemetry's GenAI attributes, the token counts filled in
    /// when the answer is whole.
    fn span(&self) -> tracing::Span {
        tracing::info_span!(
            "model",
            otel.name = %format_args!("chat {}", self.name()),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = %self.name(),
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error = tracing::field::Empty,
        )
    }

    /// Records a whole answer's call: metrics, and its span's token counts.
    fn completed(
        &self,
        result: &Result<Completion, ChatError>,
        start: Instant,
        span: &tracing::Span,
    ) {
        metrics::model_request(self.name(), "chat", result.is_ok(), start.elapsed());
        match result {
            Ok(c) => {
                span.record("gen_ai.usage.input_tokens", tokens(c.prompt_tokens));
                span.record("gen_ai.usage.output_tokens", tokens(c.completion_tokens));
            }
            Err(e) => {
                span.record("error", tracing::field::display(e));
            }
        }
    }

    /// A started stream that records its request when it ends (or fails, or is dropped:
    /// a reader gone away stops the generation); a failed start is recorded at once.
    fn metered(
        &self,
        result: Result<ChatStream, ChatError>,
        start: Instant,
        span: tracing::Span,
    ) -> Result<ChatStream, ChatError> {
        match result {
            Ok(stream) => Ok(stream.metered(self.name().to_owned(), start, span)),
            Err(e) => {
                metrics::model_request(self.name(), "chat", false, start.elapsed());
                span.record("error", tracing::field::display(&e));
                Err(e)
            }
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
