//! Local chat models: GGUF files under the models dir run in-process on the CPU.
//!
//! Supported: Llama-architecture files (`general.architecture = "llama"`, e.g. SmolLM2-135M
//! Instruct in Q4_1, the built-in chat model that `scripts/fetch-models.sh --with-llm`
//! fetches) and Qwen2 ones (`"qwen2"`: Qwen2 and Qwen2.5, e.g. Qwen2.5-Coder-0.5B Instruct
//! in Q4_K_M, which `scripts/fetch-models.sh --with-llm=qwen` fetches), each with its
//! byte-level BPE vocabulary, and Gemma 3 (`"gemma3"`) with its SentencePiece one. Qwen3
//! (`"qwen3"`: per-head norms of queries and keys, no biases) is refused, as is any other
//! architecture. Any ggml block type among F32/F16/BF16/Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K
//! is read; see [`decoder`] for how the weights are kept.
//!
//! [`LocalChat`] is the chat-model face: the first request starts one worker thread, which
//! loads the model (a second or so) and then runs requests one after another, queueing the
//! rest; tokens reach the caller through a channel, and a caller that drops its
//! [`ChatStream`](crate::ChatStream) stops the generation at the next token (or the next
//! layer of a prompt pass).
//!
//! Only instruction-tuned files are offered for chat ([`find_local_models`]): a file must
//! carry a chat template (`tokenizer.chat_template`) and the turn tokens of a format laid
//! out here. A base checkpoint (such as the Gemma 3 270M file the Gemma tests use) only
//! continues text — asked a question, it echoes the prompt — so it is never listed, and so
//! never the target of `auto`.
//!
//! Prompt formats, chosen by the vocabulary's turn tokens ([`ChatFormat`]):
//! - ChatML (`<|im_start|>`, `<|im_end|>`; SmolLM2, Qwen2): the system messages, joined, as
//!   the first `system` turn — or the template's own default system prompt when there is
//!   none (SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
//!   Qwen2.5's "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") —
//!   then `<|im_start|>{role}\n{content}<|im_end|>\n` for each message, and
//!   `<|im_start|>assistant\n` to answer.
//! - Gemma (`<start_of_turn>`, `<end_of_turn>`):
//!   `<bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n<start_of_turn>model\n`,
//!   with system messages folded into the first user turn as Gemma's own template does, and
//!   earlier assistant messages as `model` turns.
//!
//! Control tokens are added by id, never parsed from message text. Generation stops at the
//! end-of-sequence token, the format's end of turn or any other control token, or after
//! `max_tokens`.

mod bpe;
mod decoder;
mod discovery;
mod gemma3;
mod gguf;
mod llama;
mod model;
mod nibbles;
mod ops;
mod prompt;
mod quant;
mod qwen2;
mod sampling;
mod sketch;
mod tokenizer;
mod worker;

use std::path::PathBuf;

pub use discovery::find_local_models;
pub use model::{GenStats, LocalModel, StopReason};
pub use prompt::ChatFormat;
pub use sampling::{CHAT_REPEAT_PENALTY, GenParams, REPEAT_WINDOW, SHORTLIST};
pub use tokenizer::Tokenizer;
pub use worker::LocalChat;

use super::ChatError;
use gguf::Gguf;

/// Context served when the options do not say: the KV cache and rotary tables are sized to
/// it (SmolLM2 was trained on 8192, Gemma 3 270M on 32 768).
pub const DEFAULT_CONTEXT: usize = 8192;

/// Failures of loading or running a local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid model file {path}: {message}")]
    InvalidModel { path: PathBuf, message: String },
    #[error("{tokens} tokens do not fit the model's context of {context}")]
    ContextExceeded { tokens: usize, context: usize },
    #[error("generation failed: {0}")]
    Generation(String),
    #[error(
        "the model has no chat format (its vocabulary has neither ChatML's nor Gemma's turn tokens)"
    )]
    NoChatFormat,
}

impl From<LocalError> for ChatError {
    fn from(e: LocalError) -> ChatError {
        ChatError::Local(e.to_string())
    }
}

/// How local models run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// Threads of a model's pool; 0 = one per available CPU (`DOCCHAT_LLM_THREADS`).
    pub threads: usize,
    /// Most tokens (prompt and answer) one request may hold.
    pub context: usize,
    /// Seed of the sampler (temperature > 0); `None` seeds from the clock.
    pub seed: Option<u64>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            threads: 0,
            context: DEFAULT_CONTEXT,
            seed: None,
        }
    }
}

impl LocalOptions {
    fn thread_count(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// The decoder configuration of a file, read by its family (`general.architecture`).
fn model_config(g: &Gguf) -> Result<decoder::Config, LocalError> {
    let arch = g.string("general.architecture").unwrap_or_default();
    match arch {
        "gemma3" => gemma3::config(g)?.check(g),
        "llama" => llama::config(g)?.check(g),
        "qwen2" => qwen2::config(g)?.check(g),
        "qwen3" => Err(g.bad(
            "architecture \"qwen3\" is not supported: Qwen3 normalizes each query and key head \
             (attn_q_norm, attn_k_norm) and has no projection biases, which the decoder does \
             not run; Qwen2 and Qwen2.5 (\"qwen2\") are supported",
        )),
        _ => Err(g.bad(format!(
            "architecture {arch:?} is not supported (gemma3, llama, qwen2)"
        ))),
    }
}
