//! The decoder of the local chat models: a stack of pre-norm attention and gated
//! feed-forward blocks over a token embedding, as Hugging Face's `LlamaForCausalLM`,
//! `Qwen2ForCausalLM` and `Gemma3ForCausalLM` compute it. What differs between the families
//! is read from the GGUF metadata into [`Config`] by [`gemma3`](super::gemma3),
//! [`llama`](super::llama) and [`qwen2`](super::qwen2) ([`model_config`](super::model_config)
//! picks the family): embedding scale, extra norms, biases of the query, key and value
//! projections (Qwen2), rotary layout and bases, sliding windows, activation.
//!
//! Two copies of each layer's weights are kept: f32 for prompts (batched products through
//! faer, compute-bound) and the file's own 4- and 5-bit blocks for decoding one token at a
//! time (matrix-vector products, bound by memory bandwidth, so the smaller copy is faster;
//! types without a 4/5-bit form, Q6_K and Q8_0, decode in 8 bits). The output projection
//! (the tied embedding, or the file's own `output.weight`) is kept in 8 bits, and a 4-bit
//! sketch of it shortlists the next token's candidates. All work runs on the calling rayon
//! pool.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::LocalError;
use super::gguf::{DType, Gguf, Value};
use super::nibbles::NibbleMatrix;
use super::ops::{Activation, Ops, RopeLayout, RopeTable};
use super::quant::{Dots, Q8, Q8Matrix, RowSlices, dequantize, stacked_matvec};
use super::sketch::{SKETCH_CANDIDATES, Sketch, top_k};
use crate::embed::kernels::Kernels;

/// Most tokens one batched pass takes; longer prompts run in chunks of this many.
pub(crate) const PREFILL_CHUNK: usize = 512;

/// Which logits a pass computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logits {
    /// Exact logits of every token of the pass (perplexity).
    All,
    /// Exact logits of the last token.
    Last,
    /// For the last token: the likeliest tokens by the 4-bit sketch of the embedding (at
    /// least `k`, and [`SKETCH_CANDIDATES`]), scored exactly with the 8-bit one; every other
    /// logit is `-inf`. Reads half of `Last`'s bytes; the tests check on real text that the
    /// candidates hold the exact top tokens.
    Shortlist(usize),
}

/// The model families the decoder runs (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Gemma3,
    Llama,
    Qwen2,
}

/// Gemma's local layers: all but every `global_every`-th attend to the last `window`
/// tokens only, with their own rotary base.
#[derive(Debug, Clone)]
pub(crate) struct Sliding {
    pub(crate) window: usize,
    pub(crate) rope_base: f64,
    pub(crate) global_every: usize,
}

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) family: Family,
    pub(crate) hidden: usize,
    pub(crate) layers: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) ffn: usize,
    pub(crate) eps: f32,
    /// Rotary base of the global layers (every layer of a Llama).
    pub(crate) rope_base: f64,
    pub(crate) rope_layout: RopeLayout,
    pub(crate) sliding: Option<Sliding>,
    /// The model's trained context (metadata).
    pub(crate) trained_context: usize,
    pub(crate) vocab: usize,
    pub(crate) final_softcap: Option<f32>,
    /// Gemma scales the embeddings by `sqrt(hidden)`.
    pub(crate) embed_scale: Option<f32>,
    pub(crate) activation: Activation,
    /// Gemma's extra RMS norms: on each query and key head, and after the attention and
    /// feed-forward blocks.
    pub(crate) gemma_norms: bool,
    /// Qwen2's biases of the query, key and value projections (`blk.N.attn_{q,k,v}.bias`),
    /// added to the projections before the rotary embedding.
    pub(crate) qkv_bias: bool,
}

impl Config {
    /// Refuses shapes the decoder cannot run.
    pub(crate) fn check(self, g: &Gguf) -> Result<Config, LocalError> {
        let q = super::quant::QK;
        if self.heads == 0
            || self.kv_heads == 0
            || !self.heads.is_multiple_of(self.kv_heads)
            || !self.head_dim.is_multiple_of(2)
            || !self.hidden.is_multiple_of(q)
            || !self.ffn.is_multiple_of(q)
            || !(self.heads * self.head_dim).is_multiple_of(q)
            || self.vocab == 0
        {
            return Err(g.bad(format!("unsupported model shape {self:?}")));
        }
        Ok(self)
    }

    /// Refuses rotary embeddings the decoder does not run rather than running them wrongly:
    /// a scaling other than none (long-context variants: linear, YaRN) and partial rotary
    /// dimensions (`{arch}.rope.dimension_count` other than the head size).
    pub(crate) fn refuse_rope_variants(self, g: &Gguf, arch: &str) -> Result<Config, LocalError> {
        if let Some(Value::String(kind)) = g.get(&format!("{arch}.rope.scaling.type"))
            && kind != "none"
        {
            return Err(g.bad(format!("rotary scaling {kind:?} is not supported")));
        }
        if let Some(dims) = g
            .get(&format!("{arch}.rope.dimension_count"))
            .and_then(Value::as_u64)
            && dims as usize != self.head_dim
        {
            return Err(g.bad(format!(
                "rotary dimensions {dims} differ from the head size {}",
                self.head_dim
            )));
        }
        Ok(self)
    }

    /// The hyper-parameters every family states the same way (under `{arch}.`), with a
    /// Llama's defaults for the rest: no embedding scale, SiLU, interleaved rotary pairs,
    /// no sliding window, no extra norms, no projection biases.
    pub(crate) fn common(g: &Gguf, arch: &str, family: Family) -> Result<Config, LocalError> {
        let u = |k: &str| g.u64(&format!("{arch}.{k}")).map(|v| v as usize);
        let hidden = u("embedding_length")?;
        let heads = u("attention.head_count")?;
        let vocab = g
            .info("token_embd.weight")?
            .dims
            .get(1)
            .copied()
            .unwrap_or(0);
        Ok(Config {
            family,
            hidden,
            layers: u("block_count")?,
            heads,
            kv_heads: u("attention.head_count_kv").unwrap_or(heads),
            head_dim: u("attention.key_length").unwrap_or(hidden / heads.max(1)),
            ffn: u("feed_forward_length")?,
            eps: meta_f64(g, arch, "attention.layer_norm_rms_epsilon").unwrap_or(1e-5) as f32,
            rope_base: meta_f64(g, arch, "rope.freq_base").unwrap_or(10_000.0),
            rope_layout: RopeLayout::Pairs,
            sliding: None,
            trained_context: u("context_length").unwrap_or(4096),
            vocab,
            final_softcap: meta_f64(g, arch, "final_logit_softcapping")
                .filter(|&c| c > 0.0)
                .map(|c| c as f32),
            embed_scale: None,
            activation: Activation::Silu,
            gemma_norms: false,
            qkv_bias: false,
        })
    }
}

/// A numeric metadata value `{arch}.{key}`.
pub(crate) fn meta_f64(g: &Gguf, arch: &str, key: &str) -> Option<f64> {
    g.get(&format!("{arch}.{key}")).and_then(|v| v.as_f64())
}

/// A weight tensor of the file: its type, its blocks, and its values in f32.
struct Tensor {
    dtype: DType,
    raw: Vec<u8>,
    f32: Vec<f32>,
    rows: usize,
}

/// A matrix as decoding reads it.
enum Packed {
    Nibbles(NibbleMatrix),
    Q8(Q8Matrix),
}

impl Packed {
    /// The file's blocks where they are 4 or 5 bits, else 8-bit ones (Q8_0 as it is).
    fn new(t: &Tensor, cols: usize) -> Packed {
        if let Some(m) = NibbleMatrix::from_ggml(t.dtype, &t.raw, t.rows, cols) {
            return Packed::Nibbles(m);
        }
        if t.dtype == DType::Q8_0 {
            return Packed::Q8(Q8Matrix::from_q8_0(&t.raw, t.rows, cols));
        }
        Packed::Q8(Q8Matrix::from_f32(&t.f32, t.rows, cols))
    }
}

impl RowSlices for Packed {
    fn row_count(&self) -> usize {
        match self {
            Packed::Nibbles(m) => m.rows,
            Packed::Q8(m) => m.rows,
        }
    }

    fn rows_into(&self, r0: usize, x: &Q8, out: &mut [f32], dots: Dots) {
        match self {
            Packed::Nibbles(m) => m.rows_into(r0, x, out, dots),
            Packed::Q8(m) => m.rows_into(r0, x, out, dots),
        }
    }
}

/// One weight matrix (`rows` outputs × `cols` inputs, row-major), possibly several of the
/// file's tensors stacked, in both forms.
struct Linear {
    rows: usize,
    cols: usize,
    f32: Vec<f32>,
    /// The stacked tensors for decoding, in order.
    packed: Vec<Packed>,
}

impl Linear {
    fn new(tensors: Vec<Tensor>, cols: usize) -> Linear {
        let packed = tensors.iter().map(|t| Packed::new(t, cols)).collect();
        let rows = tensors.iter().map(|t| t.rows).sum();
        let mut f32 = Vec::with_capacity(rows * cols);
        for t in tensors {
            f32.extend(t.f32);
        }
        Linear {
            rows,
            cols,
            f32,
            packed,
        }
    }

    /// `out = self · x`, rows split over the current rayon pool.
    fn matvec(&self, x: &Q8, out: &mut [f32], dots: Dots) {
        stacked_matvec(&self.packed, x, out, dots)
    }
}

/// Gemma's extra norms of one layer.
struct GemmaNorms {
    q: Vec<f32>,
    k: Vec<f32>,
    post_attn: Vec<f32>,
    post_ffn: Vec<f32>,
}

struct Layer {
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    gemma: Option<GemmaNorms>,
    /// Queries, keys and values stacked.
    qkv: Linear,
    /// Their biases, stacked the same way (`heads·hd + 2·kv_heads·hd`), when the family has
    /// them.
    qkv_bias: Option<Vec<f32>>,
    o: Linear,
    /// Gate and up projections stacked.
    gate_up: Linear,
    down: Linear,
    /// The window of a sliding-window layer.
    window: Option<usize>,
}

/// The loaded decoder.
pub(crate) struct Decoder {
    pub(crate) cfg: Config,
    /// Context this instance serves (rotary tables and caches are sized to it).
    pub(crate) context: usize,
    embed: Q8Matrix,
    /// The output projection when the file has its own; else the embedding (tied).
    output: Option<Q8Matrix>,
    /// The output projection's 4-bit sketch, to shortlist the likeliest next tokens.
    sketch: Sketch,
    out_norm: Vec<f32>,
    layers: Vec<Layer>,
    rope: RopeTable,
    /// The sliding-window layers' table, when they have their own base.
    rope_local: Option<RopeTable>,
    ops: Ops,
    dots: Dots,
    kernels: Kernels,
}

/// Keys and values of the tokens seen so far, per layer (`len × kv_heads·head_dim`).
pub(crate) struct Cache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    pub(crate) len: usize,
}

impl Decoder {
    /// Reads the weights of `g` for the configuration its family read
    /// ([`model_config`](super::model_config)); `context` caps the positions served.
    pub(crate) fn load(g: &Gguf, cfg: Config, context: usize) -> Result<Decoder, LocalError> {
        let context = context.clamp(1, cfg.trained_context.max(1));
        let vector = |name: &str, len: usize| -> Result<Vec<f32>, LocalError> {
            let (info, raw) = g.raw(name)?;
            let v = dequantize(info.dtype.unwrap_or(DType::F32), &raw);
            if v.len() != len {
                return Err(g.bad(format!("{name} has {} values, expected {len}", v.len())));
            }
            Ok(v)
        };
        let matrix = |name: &str, rows: usize, cols: usize| -> Result<Tensor, LocalError> {
            let (info, raw) = g.raw(name)?;
            if info.dims != [cols, rows] {
                return Err(g.bad(format!(
                    "{name} has shape {:?}, expected [{cols}, {rows}]",
                    info.dims
                )));
            }
            let dtype = info.dtype.unwrap_or(DType::F32);
            Ok(Tensor {
                dtype,
                f32: dequantize(dtype, &raw),
                raw,
                rows,
            })
        };
        let (h, hd) = (cfg.hidden, cfg.head_dim);
        let (qd, kvd) = (cfg.heads * hd, cfg.kv_heads * hd);
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let p = |n: &str| format!("blk.{i}.{n}.weight");
            let bias = |n: &str| format!("blk.{i}.{n}.bias");
            let qkv = vec![
                matrix(&p("attn_q"), qd, h)?,
                matrix(&p("attn_k"), kvd, h)?,
                matrix(&p("attn_v"), kvd, h)?,
            ];
            let gate_up = vec![
                matrix(&p("ffn_gate"), cfg.ffn, h)?,
                matrix(&p("ffn_up"), cfg.ffn, h)?,
            ];
            let gemma = if cfg.gemma_norms {
                Some(GemmaNorms {
                    q: vector(&p("attn_q_norm"), hd)?,
                    k: vector(&p("attn_k_norm"), hd)?,
                    post_attn: vector(&p("post_attention_norm"), h)?,
                    post_ffn: vector(&p("post_ffw_norm"), h)?,
                })
            } else {
                None
            };
            let qkv_bias = if cfg.qkv_bias {
                Some(
                    [
                        vector(&bias("attn_q"), qd)?,
                        vector(&bias("attn_k"), kvd)?,
                        vector(&bias("attn_v"), kvd)?,
                    ]
                    .concat(),
                )
            } else {
                None
            };
            let window = cfg
                .sliding
                .as_ref()
                .filter(|s| (i + 1) % s.global_every != 0)
                .map(|s| s.window);
            layers.push(Layer {
                attn_norm: vector(&p("attn_norm"), h)?,
                ffn_norm: vector(&p("ffn_norm"), h)?,
                gemma,
                qkv: Linear::new(qkv, h),
                qkv_bias,
                o: Linear::new(vec![matrix(&p("attn_output"), h, qd)?], qd),
                gate_up: Linear::new(gate_up, h),
                down: Linear::new(vec![matrix(&p("ffn_down"), h, cfg.ffn)?], cfg.ffn),
                window,
            });
        }
        let embed = output_matrix(g, "token_embd.weight", cfg.vocab, h)?;
        let output = if g.tensors.contains_key("output.weight") {
            Some(output_matrix(g, "output.weight", cfg.vocab, h)?)
        } else {
            None
        };
        let sketch = Sketch::from_q8(output.as_ref().unwrap_or(&embed));
        let out_norm = vector("output_norm.weight", h)?;
        let table = |base| RopeTable::new(hd, base, context, cfg.rope_layout);
        Ok(Decoder {
            rope: table(cfg.rope_base),
            rope_local: cfg.sliding.as_ref().map(|s| table(s.rope_base)),
            cfg,
            context,
            embed,
            output,
            sketch,
            out_norm,
            layers,
            ops: Ops::detect(),
            dots: Dots::detect(),
            kernels: Kernels::detect(),
        })
    }

    pub(crate) fn new_cache(&self, capacity: usize) -> Cache {
        let kvd = self.cfg.kv_heads * self.cfg.head_dim;
        let cap = capacity.min(self.context);
        Cache {
            k: (0..self.cfg.layers)
                .map(|_| Vec::with_capacity(cap * kvd))
                .collect(),
            v: (0..self.cfg.layers)
                .map(|_| Vec::with_capacity(cap * kvd))
                .collect(),
            len: 0,
        }
    }

    /// `out (n × lin.rows) = x (n × lin.cols) · linᵀ`: quantized matrix-vector products for
    /// one or two rows, an f32 matrix product for more.
    fn linear(&self, lin: &Linear, x: &[f32], n: usize, out: &mut [f32], par: Par) {
        if n <= 2 {
            let mut xq = Q8::default();
            for (x, out) in x.chunks_exact(lin.cols).zip(out.chunks_exact_mut(lin.rows)) {
                xq.quantize_into(x);
                lin.matvec(&xq, out, self.dots);
            }
        } else {
            matmul(
                MatMut::from_row_major_slice_mut(out, n, lin.rows),
                Accum::Replace,
                MatRef::from_row_major_slice(x, n, lin.cols),
                MatRef::from_row_major_slice(&lin.f32, lin.rows, lin.cols).transpose(),
                1.0,
                par,
            );
        }
    }

    /// Runs `tokens` (at positions `cache.len..`) through the decoder, extending the cache.
    /// Returns the logits `want` asks for (`vocab` per token).
    /// `cancelled` is polled between layers; a cancelled pass returns `None`.
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        cache: &mut Cache,
        want: Logits,
        threads: usize,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<f32>>, LocalError> {
        Ok(self
            .hidden(tokens, cache, threads, cancelled)?
            .map(|x| self.logits(&x, want)))
    }

    /// The decoder's last hidden vectors (`hidden` per token, before the final norm) of
    /// `tokens` at positions `cache.len..`, extending the cache; `None` once `cancelled`.
    fn hidden(
        &self,
        tokens: &[u32],
        cache: &mut Cache,
        threads: usize,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<f32>>, LocalError> {
        let cfg = &self.cfg;
        let n = tokens.len();
        let p0 = cache.len;
        if n == 0 {
            return Err(LocalError::Generation("nothing to run".into()));
        }
        if p0 + n > self.context {
            return Err(LocalError::ContextExceeded {
                tokens: p0 + n,
                context: self.context,
            });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= cfg.vocab) {
            return Err(LocalError::Generation(format!(
                "token {bad} is outside the vocabulary"
            )));
        }
        let par = if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        };
        let (h, hd) = (cfg.hidden, cfg.head_dim);
        let (qd, kvd) = (cfg.heads * hd, cfg.kv_heads * hd);
        let qkv_w = qd + 2 * kvd;

        let mut x = vec![0f32; n * h];
        x.par_chunks_mut(h)
            .zip(tokens.par_iter())
            .for_each(|(row, &t)| {
                self.embed.row_f32(t as usize, row);
                if let Some(scale) = cfg.embed_scale {
                    for v in row.iter_mut() {
                        *v *= scale;
                    }
                }
            });
        let mut xn = vec![0f32; n * h];
        let mut qkv = vec![0f32; n * qkv_w];
        let mut ctx = vec![0f32; n * qd];
        let mut tmp = vec![0f32; n * h];
        let mut gu = vec![0f32; n * 2 * cfg.ffn];
        let mut act = vec![0f32; n * cfg.ffn];
        let ops = self.ops;

        for (li, layer) in self.layers.iter().enumerate() {
            if cancelled() {
                return Ok(None);
            }
            let rope = match (layer.window, &self.rope_local) {
                (Some(_), Some(local)) => local,
                _ => &self.rope,
            };
            // Attention block.
            xn.copy_from_slice(&x);
            ops.rms_norm_rows(&mut xn, &layer.attn_norm, cfg.eps);
            self.linear(&layer.qkv, &xn, n, &mut qkv, par);
            qkv.par_chunks_mut(qkv_w).enumerate().for_each(|(i, row)| {
                if let Some(bias) = &layer.qkv_bias {
                    for (v, b) in row.iter_mut().zip(bias) {
                        *v += b;
                    }
                }
                let (q, rest) = row.split_at_mut(qd);
                let k = &mut rest[..kvd];
                if let Some(norms) = &layer.gemma {
                    ops.rms_norm_rows(q, &norms.q, cfg.eps);
                    ops.rms_norm_rows(k, &norms.k, cfg.eps);
                }
                ops.rope(q, rope, p0 + i);
                ops.rope(k, rope, p0 + i);
            });
            let (kc, vc) = (&mut cache.k[li], &mut cache.v[li]);
            for row in qkv.chunks_exact(qkv_w) {
                kc.extend_from_slice(&row[qd..qd + kvd]);
                vc.extend_from_slice(&row[qd + kvd..]);
            }
            self.attention(layer.window, &qkv, p0, n, kc, vc, &mut ctx);
            self.linear(&layer.o, &ctx, n, &mut tmp, par);
            if let Some(norms) = &layer.gemma {
                ops.rms_norm_rows(&mut tmp, &norms.post_attn, cfg.eps);
            }
            for (x, t) in x.iter_mut().zip(&tmp) {
                *x += t;
            }
            // Feed-forward block.
            xn.copy_from_slice(&x);
            ops.rms_norm_rows(&mut xn, &layer.ffn_norm, cfg.eps);
            self.linear(&layer.gate_up, &xn, n, &mut gu, par);
            act.par_chunks_mut(cfg.ffn)
                .zip(gu.par_chunks(2 * cfg.ffn))
                .for_each(|(a, g)| ops.gate(cfg.activation, g, a, cfg.ffn));
            self.linear(&layer.down, &act, n, &mut tmp, par);
            if let Some(norms) = &layer.gemma {
                ops.rms_norm_rows(&mut tmp, &norms.post_ffn, cfg.eps);
            }
            for (x, t) in x.iter_mut().zip(&tmp) {
                *x += t;
            }
        }
        cache.len += n;
        Ok(Some(x))
    }

    /// The output projection: the file's own, or the tied embedding.
    fn output(&self) -> &Q8Matrix {
        self.output.as_ref().unwrap_or(&self.embed)
    }

    /// The logits `want` asks for of hidden vectors `x` (`vocab` per vector).
    fn logits(&self, x: &[f32], want: Logits) -> Vec<f32> {
        let (cfg, ops) = (&self.cfg, self.ops);
        let h = cfg.hidden;
        let n = x.len() / h;
        let rows: Vec<&[f32]> = if want == Logits::All {
            x.chunks_exact(h).collect()
        } else {
            vec![&x[(n - 1) * h..]]
        };
        let mut logits = vec![0f32; rows.len() * cfg.vocab];
        let mut xq = Q8::default();
        let mut normed = vec![0f32; h];
        for (row, out) in rows.into_iter().zip(logits.chunks_exact_mut(cfg.vocab)) {
            normed.copy_from_slice(row);
            ops.rms_norm_rows(&mut normed, &self.out_norm, cfg.eps);
            xq.quantize_into(&normed);
            let shortlist = match want {
                Logits::Shortlist(k) => Some(k.max(SKETCH_CANDIDATES)).filter(|&k| k < cfg.vocab),
                _ => None,
            };
            match shortlist {
                Some(k) => self.shortlist(&normed, &xq, out, k),
                None => self.output().matvec(&xq, out, self.dots),
            }
            if let Some(cap) = cfg.final_softcap {
                // Unscored tokens stay -inf (tanh would make them -cap, and drawable).
                for v in out.iter_mut().filter(|v| v.is_finite()) {
                    *v = softcap(*v, cap);
                }
            }
        }
        logits
    }

    /// Shortlisted logits (see [`Logits::Shortlist`]) of the normed last vector `x`
    /// (quantized: `xq`) into `out`: the `k` best by the sketch, scored exactly.
    fn shortlist(&self, x: &[f32], xq: &Q8, out: &mut [f32], k: usize) {
        self.sketch.scores(x, out, self.dots);
        let candidates = top_k(out, k);
        let exact: Vec<f32> = candidates
            .par_chunks(64)
            .flat_map_iter(|c| {
                c.iter()
                    .map(|&i| self.output().row_dot(i as usize, xq, self.dots))
            })
            .collect();
        out.fill(f32::NEG_INFINITY);
        for (&i, v) in candidates.iter().zip(exact) {
            out[i as usize] = v;
        }
    }

    /// Attention of the `n` queries in `qkv` (positions `p0..p0+n`) over the cached keys and
    /// values (which already include these tokens); the result goes to `ctx` (`n × heads·hd`).
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        window: Option<usize>,
        qkv: &[f32],
        p0: usize,
        n: usize,
        kc: &[f32],
        vc: &[f32],
        ctx: &mut [f32],
    ) {
        let cfg = &self.cfg;
        let hd = cfg.head_dim;
        let (qd, kvd) = (cfg.heads * hd, cfg.kv_heads * hd);
        let qkv_w = qd + 2 * kvd;
        let total = p0 + n;
        // Keys the earliest query may see.
        let kstart = window.map_or(0, |w| (p0 + 1).saturating_sub(w));
        let len = total - kstart;
        let group = cfg.heads / cfg.kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let kernels = self.kernels;

        // One task per query head, each writing its own columns of ctx.
        let mut tasks = Vec::with_capacity(cfg.heads);
        let mut view = MatMut::from_row_major_slice_mut(ctx, n, qd);
        for head in 0..cfg.heads {
            let (this, others) = view.split_at_col_mut(hd);
            tasks.push((head, this));
            view = others;
        }
        let work = |(head, out): (usize, MatMut<'_, f32>)| {
            let g = head / group;
            let first = head * hd;
            let q = strided(qkv, first, n, hd, qkv_w);
            let kv_first = kstart * kvd + g * hd;
            let keys = strided(kc, kv_first, len, hd, kvd);
            let values = strided(vc, kv_first, len, hd, kvd);
            let mut scores = vec![0f32; n * len];
            matmul(
                MatMut::from_row_major_slice_mut(&mut scores, n, len),
                Accum::Replace,
                q,
                keys.transpose(),
                scale,
                Par::Seq,
            );
            // Causal mask, and the window on sliding layers: query at position qp sees keys
            // kp with kp <= qp and qp - kp < window.
            for (i, row) in scores.chunks_exact_mut(len).enumerate() {
                let qp = p0 + i;
                let lo = window.map_or(0, |w| (qp + 1).saturating_sub(w));
                for (j, s) in row.iter_mut().enumerate() {
                    let kp = kstart + j;
                    if kp > qp || kp < lo {
                        *s = f32::NEG_INFINITY;
                    }
                }
            }
            kernels.softmax_rows(&mut scores, len);
            matmul(
                out,
                Accum::Replace,
                MatRef::from_row_major_slice(&scores, n, len),
                values,
                1.0,
                Par::Seq,
            );
        };
        // Parallel once the heads have a few hundred keys each (a decoded token, too).
        if n * len >= 256 {
            tasks.into_par_iter().for_each(work);
        } else {
            tasks.into_iter().for_each(work);
        }
    }
}

/// Gemma's final logit soft-capping: `cap · tanh(v / cap)`.
fn softcap(v: f32, cap: f32) -> f32 {
    (v / cap).tanh() * cap
}

/// The `rows × cols` matrix starting at `data[first]` with rows `stride` apart.
fn strided(data: &[f32], first: usize, rows: usize, cols: usize, stride: usize) -> MatRef<'_, f32> {
    MatRef::from_row_major_slice_with_stride(
        &data[first..first + (rows - 1) * stride + cols],
        rows,
        cols,
        stride,
    )
}

/// A `rows × cols` matrix of the file in 8 bits (Q8_0 as it is), read a slice at a time:
/// the largest tensors (embeddings), whose copy in the file and ours are never both in
/// memory.
fn output_matrix(g: &Gguf, name: &str, rows: usize, cols: usize) -> Result<Q8Matrix, LocalError> {
    let info = g.info(name)?.clone();
    let dt = info
        .dtype
        .ok_or_else(|| g.bad(format!("{name} has an unsupported type")))?;
    if info.dims != [cols, rows] {
        return Err(g.bad(format!("{name} has shape {:?}", info.dims)));
    }
    let (per, bytes) = dt.block();
    let row_bytes = cols / per * bytes;
    let mut m = Q8Matrix::with_capacity(rows, cols);
    const ROWS: usize = 8192;
    for r0 in (0..rows).step_by(ROWS) {
        let n = ROWS.min(rows - r0);
        let raw = g.raw_range(name, r0 * row_bytes, n * row_bytes)?;
        match dt {
            DType::Q8_0 => m.append_q8_0(&raw),
            _ => m.append_f32(&dequantize(dt, &raw)),
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::tokenizer::Tokenizer;
    use super::*;

    /// A model file when it has been fetched (`scripts/fetch-models.sh --with-llm`); its
    /// absence fails the test in CI and is a loud skip elsewhere.
    fn model_file(relative: &str) -> Option<PathBuf> {
        docchat_common::testing::model_file(relative)
    }

    #[test]
    fn the_sketch_shortlist_holds_the_likely_tokens_of_gemma3() {
        if let Some(path) = model_file(docchat_common::testing::GEMMA_GGUF) {
            shortlist_holds_the_likely_tokens(&path);
        }
    }

    #[test]
    fn the_sketch_shortlist_holds_the_likely_tokens_of_smollm2() {
        if let Some(path) = model_file(docchat_common::testing::SMOLLM2_GGUF) {
            shortlist_holds_the_likely_tokens(&path);
        }
    }

    #[test]
    fn the_sketch_shortlist_holds_the_likely_tokens_of_qwen() {
        // A vocabulary three times SmolLM2's, with its own (untied) output projection.
        if let Some(path) = model_file(docchat_common::testing::QWEN_GGUF) {
            shortlist_holds_the_likely_tokens(&path);
        }
    }

    /// On real text, at every position: the shortlist picks the same greedy token as the
    /// exact logits, scores its candidates exactly, and holds (nearly) all of the
    /// distribution that sampling draws from (the exact top 64, cut at top-p 0.95).
    fn shortlist_holds_the_likely_tokens(path: &std::path::Path) {
        let g = Gguf::open(path).unwrap();
        let t = Tokenizer::from_gguf(&g).unwrap();
        let m = Decoder::load(&g, super::super::model_config(&g).unwrap(), 1024).unwrap();
        let text = "The history of the printing press begins in the fifteenth century, when \
            Johannes Gutenberg combined movable metal type, oil-based ink and a screw press. \
            Books became cheaper, literacy spread, and ideas travelled faster than ever. \
            def mean(values):\n    return sum(values) / len(values)\n\n\
            Die Katze sitzt auf der Matte, und der Hund schläft im Garten. \
            La ville de Paris est la capitale de la France. 東京は日本の首都です。 \
            In 1969, Apollo 11 landed on the Moon; Neil Armstrong and Buzz Aldrin walked on \
            its surface while Michael Collins orbited above. The mission lasted eight days.";
        let mut ids = t.start();
        ids.extend(t.encode(text));
        let mut cache = m.new_cache(ids.len());
        let x = m.hidden(&ids, &mut cache, 2, &|| false).unwrap().unwrap();
        let argmax = |l: &[f32]| {
            l.iter()
                .enumerate()
                .fold(
                    (0, f32::NEG_INFINITY),
                    |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                )
                .0
        };
        let mut lost = Vec::new();
        for (pos, row) in x.chunks_exact(m.cfg.hidden).enumerate() {
            let exact = m.logits(row, Logits::Last);
            let short = m.logits(row, Logits::Shortlist(64));
            // A shortlist, not the exact logits under another name.
            let scored = short.iter().filter(|v| v.is_finite()).count();
            assert_eq!(scored, SKETCH_CANDIDATES, "position {pos}");
            assert_eq!(argmax(&short), argmax(&exact), "position {pos}");
            // The sampling distribution at temperature 1.
            let mut top = top_k(&exact, 64);
            top.sort_by(|a, b| exact[*b as usize].total_cmp(&exact[*a as usize]));
            let max = exact[top[0] as usize];
            let p: Vec<f32> = top
                .iter()
                .map(|&i| (exact[i as usize] - max).exp())
                .collect();
            let total: f32 = p.iter().sum();
            let (mut cum, mut nucleus, mut kept) = (0.0, 0.0, 0.0);
            for (&i, &p) in top.iter().zip(&p) {
                if cum >= 0.95 {
                    break;
                }
                cum += p / total;
                nucleus += p;
                let s = short[i as usize];
                if s != f32::NEG_INFINITY {
                    assert_eq!(s, exact[i as usize], "candidates are scored exactly");
                    kept += p;
                }
            }
            lost.push(1.0 - kept / nucleus);
        }
        lost.sort_by(f32::total_cmp);
        let n = lost.len();
        let mean = lost.iter().sum::<f32>() / n as f32;
        eprintln!(
            "{n} positions: sampling mass lost mean {mean:.4}, p90 {:.4}, max {:.4}",
            lost[n * 9 / 10],
            lost[n - 1]
        );
        assert!(mean < 0.01 && lost[n - 1] < 0.15, "{lost:?}");

        // With soft-capping (Gemma 2's; this file has none) unscored tokens stay -inf.
        let row = &x[x.len() - m.cfg.hidden..];
        let uncapped = m.logits(row, Logits::Shortlist(64));
        let mut capped = m;
        capped.cfg.final_softcap = Some(30.0);
        let short = capped.logits(row, Logits::Shortlist(64));
        for (s, u) in short.iter().zip(&uncapped) {
            if u.is_finite() {
                assert_eq!(*s, softcap(*u, 30.0));
            } else {
                assert_eq!(*s, f32::NEG_INFINITY);
            }
        }
    }
}
