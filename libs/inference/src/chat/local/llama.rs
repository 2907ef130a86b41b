//! Llama (`general.architecture = "llama"`, e.g. SmolLM2), as Hugging Face's
//! `LlamaForCausalLM` computes it:
//!
//! - token embeddings as they are; the output projection is the file's `output.weight`, or
//!   the embedding when the model ties them (SmolLM2 does);
//! - an RMS norm before attention and before the feed-forward block;
//! - grouped-query attention with scale `1/sqrt(head_dim)`, rotary embeddings on every
//!   layer with the file's `rope.freq_base` (SmolLM2: 100 000);
//! - SwiGLU MLP: `down(silu(gate(x)) · up(x))`.
//!
//! Rotary layout: Hugging Face's Llama turns dimension pairs `(i, i + half)` of each head,
//! but llama.cpp's converter permutes the rows of the query and key weights
//! (`permute(w, n_head)` in `convert_hf_to_gguf.py`) so that the same rotation becomes one
//! of interleaved pairs `(2i, 2i + 1)`, which is how llama.cpp runs a Llama (rope type
//! "normal"). The file's heads are therefore turned in pairs ([`RopeLayout::Pairs`]).

use super::LocalError;
use super::decoder::{Config, Family};
use super::gguf::Gguf;

/// A Llama's [`Config`] from the file's metadata; rotary scaling (long-context variants)
/// and partial rotary dimensions are refused rather than run wrongly.
pub(crate) fn config(g: &Gguf) -> Result<Config, LocalError> {
    Config::common(g, "llama", Family::Llama)?.refuse_rope_variants(g, "llama")
}
