//! Qwen2 (`general.architecture = "qwen2"`: Qwen2, Qwen2.5 and their Coder and Math
//! variants, e.g. Qwen2.5-Coder-0.5B Instruct), as Hugging Face's `Qwen2ForCausalLM`
//! computes it:
//!
//! - token embeddings as they are; the output projection is the file's `output.weight`, or
//!   the embedding when the file ties them (the 0.5B model ties them in Hugging Face's
//!   checkpoint, but its GGUF may carry its own copy);
//! - an RMS norm before attention and before the feed-forward block (`rms_norm_eps`,
//!   1e-6);
//! - grouped-query attention with scale `1/sqrt(head_dim)` whose query, key and value
//!   projections have biases (`q_proj`, `k_proj`, `v_proj` are `nn.Linear(..., bias=True)`;
//!   the output projection has none), added before the rotary embedding; rotary embeddings
//!   on every layer with the file's `rope.freq_base` (Qwen2.5: 1 000 000);
//! - SwiGLU MLP: `down(silu(gate(x)) · up(x))`.
//!
//! Rotary layout: Hugging Face's Qwen2 turns dimension pairs `(i, i + half)` of each head
//! (`rotate_half`), and unlike a Llama's the converter leaves the query and key rows as
//! they are, so llama.cpp runs Qwen2 with its NEOX rope: the file's heads are turned in
//! halves ([`RopeLayout::Halves`]).
//!
//! Qwen3 (`"qwen3"`) is a different architecture (per-head RMS norms of queries and keys,
//! no biases) and is refused by [`model_config`](super::model_config).

use super::LocalError;
use super::decoder::{Config, Family, meta_f64};
use super::gguf::Gguf;
use super::ops::RopeLayout;

/// A Qwen2's [`Config`] from the file's metadata; rotary scaling (YaRN, for contexts past
/// the trained one) and partial rotary dimensions are refused rather than run wrongly.
pub(crate) fn config(g: &Gguf) -> Result<Config, LocalError> {
    let mut cfg = Config::common(g, "qwen2", Family::Qwen2)?.refuse_rope_variants(g, "qwen2")?;
    let f = |k: &str| meta_f64(g, "qwen2", k);
    cfg.eps = f("attention.layer_norm_rms_epsilon").unwrap_or(1e-6) as f32;
    cfg.rope_base = f("rope.freq_base").unwrap_or(1_000_000.0);
    cfg.rope_layout = RopeLayout::Halves;
    cfg.trained_context = g.u64("qwen2.context_length").map_or(32_768, |v| v as usize);
    cfg.qkv_bias = true;
    Ok(cfg)
}
