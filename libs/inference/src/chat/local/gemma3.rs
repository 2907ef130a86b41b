//! Gemma 3 (`general.architecture = "gemma3"`), as Hugging Face's `Gemma3ForCausalLM`
//! computes it:
//!
//! - token embeddings scaled by `sqrt(hidden)`; the output projection is the same (tied)
//!   embedding matrix;
//! - RMS norms with `1 + weight` (the GGUF converter stores the `1 +`), before and after
//!   attention and before and after the feed-forward block, and on each query and key head;
//! - grouped-query attention with scale `1/sqrt(head_dim)`; five sliding-window layers
//!   (window 512, rotary base 10 000) for every global one (rotary base 1 000 000), rotary
//!   pairs `(i, i + half)` (the converter leaves Gemma's query and key rows as they are);
//! - GELU-tanh gated MLP.

use super::LocalError;
use super::decoder::{Config, Family, Sliding, meta_f64};
use super::gguf::Gguf;
use super::ops::{Activation, RopeLayout};

/// Gemma 3's [`Config`] from the file's metadata.
pub(crate) fn config(g: &Gguf) -> Result<Config, LocalError> {
    let f = |k: &str| meta_f64(g, "gemma3", k);
    let mut cfg = Config::common(g, "gemma3", Family::Gemma3)?;
    cfg.eps = f("attention.layer_norm_rms_epsilon").unwrap_or(1e-6) as f32;
    cfg.rope_base = f("rope.freq_base").unwrap_or(1_000_000.0);
    cfg.rope_layout = RopeLayout::Halves;
    cfg.sliding = Some(Sliding {
        window: g
            .u64("gemma3.attention.sliding_window")
            .map_or(512, |v| v as usize),
        rope_base: f("rope.local.freq_base").unwrap_or(10_000.0),
        global_every: 6,
    });
    cfg.trained_context = g
        .u64("gemma3.context_length")
        .map_or(32_768, |v| v as usize);
    cfg.embed_scale = Some((cfg.hidden as f32).sqrt());
    cfg.activation = Activation::GeluTanh;
    cfg.gemma_norms = true;
    Ok(cfg)
}
