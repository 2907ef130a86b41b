//! Chat models and embedders for docchat: the model registry (the models file of
//! ARCHITECTURE.md §5, read once at start) and sentence embedders (§6): the local
//! all-MiniLM-L6-v2 run in-process and any OpenAI-compatible `/v1/embeddings` upstream,
//! gathered by name in [`Embedders`]; and local GGUF chat models run in-process
//! ([`LocalChat`], behind the same calls as an upstream through [`ChatModel`]).

pub mod catalog;
pub mod chat;
pub mod embed;
pub mod registry;
pub mod rerank;
pub mod transcribe;

pub use catalog::{Catalog, Upstream};
pub use chat::local;
pub use chat::{
    ChatError, ChatMessage, ChatModel, ChatStream, Completion, EventSource, OpenAiChat, Sampling,
    StreamEvent, ToolCall, ToolChoice, ToolSpec, Tools,
};
pub use embed::{
    EmbedError, Embedder, Embedders, MINILM_NAME, MiniLmEmbedder, OpenAiEmbedder, Precision,
    l2_normalize,
};
pub use local::{LocalChat, LocalError, LocalModel, LocalOptions, find_local_models};
pub use registry::{ApiKey, ModelEntry, ModelKind, Registry};
pub use rerank::{RerankError, Reranked, Reranker};
pub use transcribe::{SpeechSegment, TranscribeError, Transcriber, Transcript};

/// The current span's trace context as request headers (`traceparent`): a model upstream
/// that traces joins docchat's trace.
pub(crate) fn trace_headers() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    docchat_common::telemetry::inject_http(&mut headers);
    headers
}
