//! Integration tests of docchat-inference: the local Gemma 3 chat model and the local
//! MiniLM against sentence-transformers' reference vectors (when the models have been
//! fetched), and the OpenAI-compatible embedder against an HTTP server started in the test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]
// Tests without the model files say on stderr that they are skipped.

mod local_llm;
mod minilm;
mod openai;
mod rerank;
mod tool_calls;
