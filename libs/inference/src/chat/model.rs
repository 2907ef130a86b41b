//! [`ChatModel`]: the provider of a registry entry, behind one set of calls.

use super::local::{LocalChat, LocalOptions};
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
        match self {
            ChatModel::OpenAi(m) => m.stream_tools(messages, sampling, tools).await,
            ChatModel::Local(m) => Err(ChatError::ToolsUnsupported(m.name().to_owned())),
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
