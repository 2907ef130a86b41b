//! Integration tests of docchat-inference: the local MiniLM against sentence-transformers'
//! reference vectors (when the model has been fetched), and the OpenAI-compatible
//! embedder against an HTTP server started in the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests without the model files say on stderr that they are skipped.
#![allow(clippy::print_stderr)]

mod minilm;
mod openai;
