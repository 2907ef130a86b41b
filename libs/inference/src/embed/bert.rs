//! A BERT encoder forward pass for sentence embeddings on the CPU.
//!
//! Written for throughput on long inputs rather than generality:
//! - sequences are packed without padding: the dense layers run once over all tokens of a
//!   batch (`tokens × hidden`), and attention runs per sequence and head with that
//!   sequence's own length, so no work is spent on pad tokens and no mask is needed;
//! - query, key and value are one fused projection (`hidden → 3·hidden`);
//! - attention is two small matrix products per (sequence, head), spread over the thread
//!   pool, with the softmax in between done in cache;
//! - everything but attention runs a block of rows per task, and a block goes through the
//!   output projection, the feed-forward and both layer norms in one task, so the
//!   feed-forward's activations (four times the hidden width) stay in that core's cache;
//!   bias, activation, residual and layer norm are vectorized passes ([`super::kernels`]).
//!
//! Matrix products are faer's (AVX-512 / AVX2 kernels chosen at run time), except that with
//! [`Precision::Auto`] on x86-64 CPUs with AVX-512 VNNI or AVX2 the linear layers run in int8
//! ([`super::int8`]: about twice the throughput at 256 tokens with VNNI, embeddings within
//! cosine 0.99 of f32's), on AMX tiles where the CPU has them ([`super::amx`]) and with
//! `vpmaddwd` where it has only AVX2 ([`super::avx2`]), all three the same sums. In f32,
//! results equal Hugging Face's `BertModel` with an attention mask up to float rounding.
//!
//! Why not candle-transformers' `BertModel`: measured with `bench/embeddings` texts on the
//! 2-core development machine, candle 0.11.1 ran 39 sentences/s at 64 tokens and 7.4 at 256
//! (PyTorch: about 120 and 27; this code: about 250 and 55). Its attention is a padded
//! batched matmul, which candle's CPU backend runs one (sequence, head) product after
//! another, each split over the threads.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use super::EmbedError;
use super::kernels::Kernels;

/// Rows per parallel task of the element-wise passes.
const ROW_BLOCK: usize = 32;

/// The fields of a Hugging Face BERT `config.json` this forward pass uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    #[serde(default = "default_position_embedding_type")]
    pub position_embedding_type: String,
}

fn default_type_vocab_size() -> usize {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}
fn default_hidden_act() -> String {
    "gelu".into()
}
fn default_position_embedding_type() -> String {
    "absolute".into()
}

impl BertConfig {
    fn check(&self) -> Result<(), String> {
        if self.hidden_size == 0
            || self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\")",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported (only \"absolute\")",
                self.position_embedding_type
            ));
        }
        if self.type_vocab_size == 0 {
            return Err("type_vocab_size is 0".into());
        }
        Ok(())
    }
}

/// The arithmetic of the encoder's linear layers (query/key/value, attention output,
/// feed-forward): nearly all of its work. Attention, GELU and layer norm are f32 always.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// The fastest arithmetic this CPU has that keeps embeddings within cosine 0.99 of
    /// [`Precision::F32`]'s: int8 weights and activations with exact i32 sums where the CPU
    /// has AVX-512 VNNI (x86-64 since Ice Lake / Zen 4) or AVX2 and FMA (since Haswell /
    /// Zen 1), f32 elsewhere.
    #[default]
    Auto,
    /// f32 throughout (faer's matrix products).
    F32,
}

/// A linear layer's weight `W` (`in × out`, row-major: `y = x W`), in the arithmetic
/// chosen at load time.
enum Linear {
    F32 {
        w: Vec<f32>,
        inp: usize,
        out: usize,
    },
    #[cfg(target_arch = "x86_64")]
    Int8(super::int8::Int8Linear),
}

impl Linear {
    fn new(w: Vec<f32>, inp: usize, out: usize, precision: Precision) -> Linear {
        #[cfg(target_arch = "x86_64")]
        if precision == Precision::Auto
            && let Some(q) = super::int8::Int8Linear::new(&w, inp, out)
        {
            return Linear::Int8(q);
        }
        let _ = precision;
        Linear::F32 { w, inp, out }
    }

    /// The arithmetic in use, for logs and tests: `"f32"`, `"int8"`, `"int8-amx"` or `"int8-avx2"`.
    fn kind(&self) -> &'static str {
        match self {
            Linear::F32 { .. } => "f32",
            #[cfg(target_arch = "x86_64")]
            Linear::Int8(q) => q.kind(),
        }
    }

    /// Rows per parallel task of the passes that run a layer's products a block of rows at
    /// a time: enough for the int8 kernels' tiles, and for faer's f32 kernels to repay
    /// packing a weight matrix, while a block's intermediates stay in L2.
    fn block_rows(&self) -> usize {
        match self {
            Linear::F32 { .. } => 256,
            #[cfg(target_arch = "x86_64")]
            Linear::Int8(_) => 32,
        }
    }

    /// `y = x W` for the `rows` rows of `x`, on this thread (f32 products may also use
    /// `par`).
    fn forward(
        &self,
        x: &[f32],
        rows: usize,
        y: &mut [f32],
        scratch: &mut LinearScratch,
        par: Par,
    ) -> Result<(), EmbedError> {
        match self {
            Linear::F32 { w, inp, out } => {
                matmul(
                    MatMut::from_row_major_slice_mut(y, rows, *out),
                    Accum::Replace,
                    MatRef::from_row_major_slice(x, rows, *inp),
                    MatRef::from_row_major_slice(w, *inp, *out),
                    1.0,
                    par,
                );
                let _ = scratch; // the int8 arm's
                Ok(())
            }
            #[cfg(target_arch = "x86_64")]
            Linear::Int8(q) => {
                if q.matmul(x, rows, y, &mut scratch.int8) {
                    Ok(())
                } else {
                    Err(EmbedError::Internal(
                        "the int8 kernel refused its operands".into(),
                    ))
                }
            }
        }
    }
}

/// A thread's buffers for [`Linear::forward`].
#[derive(Default)]
struct LinearScratch {
    #[cfg(target_arch = "x86_64")]
    int8: super::int8::Scratch,
}

/// A thread's buffers for a block of rows going through [`Layer::finish`].
#[derive(Default)]
struct Scratch {
    /// A block's output projections (`rows × hidden`).
    tmp: Vec<f32>,
    /// A block's feed-forward activations (`rows × intermediate`).
    mid: Vec<f32>,
    linear: LinearScratch,
}

/// One encoder layer.
struct Layer {
    qkv_w: Linear,
    qkv_b: Vec<f32>,
    attn_out_w: Linear,
    attn_out_b: Vec<f32>,
    attn_ln_g: Vec<f32>,
    attn_ln_b: Vec<f32>,
    inter_w: Linear,
    inter_b: Vec<f32>,
    out_w: Linear,
    out_b: Vec<f32>,
    out_ln_g: Vec<f32>,
    out_ln_b: Vec<f32>,
}

impl Layer {
    /// The width of the layer's input and output rows.
    fn hidden(&self) -> usize {
        self.attn_out_b.len()
    }

    /// `(x · Wq|Wk|Wv + b)` of a block of rows into `qkv`, queries scaled by `q_scale`.
    fn project_qkv(
        &self,
        x: &[f32],
        qkv: &mut [f32],
        q_scale: f32,
        scratch: &mut LinearScratch,
        k: Kernels,
        par: Par,
    ) -> Result<(), EmbedError> {
        let rows = x.len() / self.hidden();
        self.qkv_w.forward(x, rows, qkv, scratch, par)?;
        k.qkv_bias_rows(qkv, &self.qkv_b, q_scale);
        Ok(())
    }

    /// The rest of the layer for a block of rows `x` whose attention context is `ctx`:
    /// output projection, residual and layer norm, then the feed-forward
    /// (`GELU(x W1 + b1) W2 + b2`), residual and layer norm; `x` is updated in place. Run
    /// a block at a time so that its feed-forward activations, four times as wide as `x`,
    /// stay in cache between the products instead of going through memory three times.
    fn finish(
        &self,
        x: &mut [f32],
        ctx: &[f32],
        s: &mut Scratch,
        eps: f32,
        k: Kernels,
        par: Par,
    ) -> Result<(), EmbedError> {
        let rows = x.len() / self.hidden();
        s.tmp.resize(x.len(), 0.0);
        s.mid.resize(rows * self.inter_b.len(), 0.0);
        self.attn_out_w
            .forward(ctx, rows, &mut s.tmp, &mut s.linear, par)?;
        k.residual_layer_norm_rows(
            x,
            &s.tmp,
            &self.attn_out_b,
            &self.attn_ln_g,
            &self.attn_ln_b,
            eps,
        );
        self.inter_w
            .forward(x, rows, &mut s.mid, &mut s.linear, par)?;
        k.bias_gelu_rows(&mut s.mid, &self.inter_b);
        self.out_w
            .forward(&s.mid, rows, &mut s.tmp, &mut s.linear, par)?;
        k.residual_layer_norm_rows(x, &s.tmp, &self.out_b, &self.out_ln_g, &self.out_ln_b, eps);
        Ok(())
    }
}

/// BERT weights and the forward pass.
pub(crate) struct Bert {
    cfg: BertConfig,
    word_emb: Vec<f32>,
    pos_emb: Vec<f32>,
    type_emb: Vec<f32>,
    emb_ln_g: Vec<f32>,
    emb_ln_b: Vec<f32>,
    layers: Vec<Layer>,
    kernels: Kernels,
}

/// Reads named f32 tensors out of a safetensors file, with or without a `bert.` prefix.
struct Weights<'a> {
    st: SafeTensors<'a>,
    prefix: &'static str,
}

impl<'a> Weights<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, String> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if st.names().iter().any(|n| n.starts_with("bert.embeddings.")) {
            "bert."
        } else {
            ""
        };
        Ok(Weights { st, prefix })
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .st
            .tensor(&full)
            .map_err(|e| format!("tensor {full}: {e}"))?;
        if view.shape() != shape {
            return Err(format!(
                "tensor {full} has shape {:?}, expected {shape:?}",
                view.shape()
            ));
        }
        if view.dtype() != Dtype::F32 {
            return Err(format!(
                "tensor {full} is {:?}; only F32 weights are supported",
                view.dtype()
            ));
        }
        let (words, _) = view.data().as_chunks::<4>();
        Ok(words.iter().map(|b| f32::from_le_bytes(*b)).collect())
    }

    /// A `out × in` linear weight, returned transposed (`in × out`).
    fn linear_t(&self, name: &str, out: usize, inp: usize) -> Result<Vec<f32>, String> {
        let w = self.get(name, &[out, inp])?;
        Ok(transpose(&w, out, inp))
    }
}

/// Transposes a row-major `rows × cols` matrix.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; w.len()];
    for (r, row) in w.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            t[c * rows + r] = v;
        }
    }
    t
}

impl Bert {
    /// Builds the model from `config.json` text and the bytes of `model.safetensors`, its
    /// linear layers in `precision`.
    pub(crate) fn load(
        config_json: &str,
        safetensors: &[u8],
        precision: Precision,
    ) -> Result<Bert, String> {
        let cfg: BertConfig =
            serde_json::from_str(config_json).map_err(|e| format!("config.json: {e}"))?;
        cfg.check()?;
        let w = Weights::new(safetensors)?;
        let h = cfg.hidden_size;
        let inter = cfg.intermediate_size;
        let word_emb = w.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?;
        let pos_emb = w.get(
            "embeddings.position_embeddings.weight",
            &[cfg.max_position_embeddings, h],
        )?;
        let type_emb = w.get(
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        let emb_ln_g = w.get("embeddings.LayerNorm.weight", &[h])?;
        let emb_ln_b = w.get("embeddings.LayerNorm.bias", &[h])?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}.");
            let q = w.get(&format!("{p}attention.self.query.weight"), &[h, h])?;
            let k = w.get(&format!("{p}attention.self.key.weight"), &[h, h])?;
            let v = w.get(&format!("{p}attention.self.value.weight"), &[h, h])?;
            let mut qkv = q;
            qkv.extend_from_slice(&k);
            qkv.extend_from_slice(&v);
            let mut qkv_b = w.get(&format!("{p}attention.self.query.bias"), &[h])?;
            qkv_b.extend(w.get(&format!("{p}attention.self.key.bias"), &[h])?);
            qkv_b.extend(w.get(&format!("{p}attention.self.value.bias"), &[h])?);
            let linear = |name: &str, out: usize, inp: usize| -> Result<Linear, String> {
                let t = w.linear_t(&format!("{p}{name}"), out, inp)?;
                Ok(Linear::new(t, inp, out, precision))
            };
            layers.push(Layer {
                qkv_w: Linear::new(transpose(&qkv, 3 * h, h), h, 3 * h, precision),
                qkv_b,
                attn_out_w: linear("attention.output.dense.weight", h, h)?,
                attn_out_b: w.get(&format!("{p}attention.output.dense.bias"), &[h])?,
                attn_ln_g: w.get(&format!("{p}attention.output.LayerNorm.weight"), &[h])?,
                attn_ln_b: w.get(&format!("{p}attention.output.LayerNorm.bias"), &[h])?,
                inter_w: linear("intermediate.dense.weight", inter, h)?,
                inter_b: w.get(&format!("{p}intermediate.dense.bias"), &[inter])?,
                out_w: linear("output.dense.weight", h, inter)?,
                out_b: w.get(&format!("{p}output.dense.bias"), &[h])?,
                out_ln_g: w.get(&format!("{p}output.LayerNorm.weight"), &[h])?,
                out_ln_b: w.get(&format!("{p}output.LayerNorm.bias"), &[h])?,
            });
        }
        Ok(Bert {
            cfg,
            word_emb,
            pos_emb,
            type_emb,
            emb_ln_g,
            emb_ln_b,
            layers,
            kernels: Kernels::detect(),
        })
    }

    pub(crate) fn hidden_size(&self) -> usize {
        self.cfg.hidden_size
    }

    pub(crate) fn max_positions(&self) -> usize {
        self.cfg.max_position_embeddings
    }

    /// The arithmetic of the linear layers: `"f32"`, `"int8"`, `"int8-amx"` or `"int8-avx2"`.
    pub(crate) fn linear_kind(&self) -> &'static str {
        self.layers.first().map_or("f32", |l| l.qkv_w.kind())
    }

    /// Mean-pooled last hidden states of each sequence of token ids (not normalized).
    /// Runs on the current rayon pool; `threads` is that pool's size.
    pub(crate) fn mean_pooled(
        &self,
        seqs: &[&[u32]],
        threads: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let h = self.cfg.hidden_size;
        let eps = self.cfg.layer_norm_eps as f32;
        let k = self.kernels;
        let par = if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        };
        let mut offsets = Vec::with_capacity(seqs.len() + 1);
        offsets.push(0usize);
        for s in seqs {
            if s.is_empty() || s.len() > self.cfg.max_position_embeddings {
                return Err(EmbedError::Internal(format!(
                    "a sequence of {} tokens is outside 1..={}",
                    s.len(),
                    self.cfg.max_position_embeddings
                )));
            }
            if let Some(bad) = s.iter().find(|&&id| id as usize >= self.cfg.vocab_size) {
                return Err(EmbedError::Internal(format!(
                    "token id {bad} is outside the vocabulary"
                )));
            }
            offsets.push(offsets[offsets.len() - 1] + s.len());
        }
        let n = offsets[offsets.len() - 1];
        if n == 0 {
            return Ok(Vec::new());
        }

        // Embeddings: word + position + token type 0, then layer norm.
        let token_pos: Vec<(u32, usize)> = seqs
            .iter()
            .flat_map(|s| s.iter().enumerate().map(|(p, &id)| (id, p)))
            .collect();
        let mut x = vec![0f32; n * h];
        let type0 = &self.type_emb[..h];
        x.par_chunks_mut(ROW_BLOCK * h)
            .zip(token_pos.par_chunks(ROW_BLOCK))
            .for_each(|(rows, toks)| {
                for (row, &(id, p)) in rows.chunks_exact_mut(h).zip(toks) {
                    let id = id as usize;
                    k.sum3(
                        row,
                        &self.word_emb[id * h..(id + 1) * h],
                        &self.pos_emb[p * h..(p + 1) * h],
                        type0,
                    );
                }
                k.layer_norm_rows(rows, &self.emb_ln_g, &self.emb_ln_b, eps);
            });

        let mut qkv = vec![0f32; n * 3 * h];
        let mut ctx = vec![0f32; n * h];
        let heads = self.cfg.num_attention_heads;
        let head_dim = h / heads;
        let q_scale = 1.0 / (head_dim as f32).sqrt();
        // The products run a block of rows per task; a single block may spread its f32
        // products over the pool instead.
        let block = self.layers.first().map_or(n, |l| l.qkv_w.block_rows());
        let inner = if n <= block { par } else { Par::Seq };

        for layer in &self.layers {
            qkv.par_chunks_mut(block * 3 * h)
                .zip(x.par_chunks(block * h))
                .try_for_each_init(LinearScratch::default, |s, (qkv, x)| {
                    layer.project_qkv(x, qkv, q_scale, s, k, inner)
                })?;
            self.attention(&qkv, &mut ctx, &offsets, head_dim);
            x.par_chunks_mut(block * h)
                .zip(ctx.par_chunks(block * h))
                .try_for_each_init(Scratch::default, |s, (x, ctx)| {
                    layer.finish(x, ctx, s, eps, k, inner)
                })?;
        }

        Ok(offsets
            .par_windows(2)
            .map(|w| k.mean_rows(&x[w[0] * h..w[1] * h], h))
            .collect())
    }

    /// Scaled dot-product attention of every (sequence, head), each sequence attending only
    /// to its own tokens. `qkv` holds the fused projections (queries already scaled);
    /// the result goes to `ctx` (`tokens × hidden`, heads side by side).
    fn attention(&self, qkv: &[f32], ctx: &mut [f32], offsets: &[usize], head_dim: usize) {
        let h = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let stride = 3 * h;
        // Disjoint writable views of ctx, one per (sequence, head).
        let mut tasks = Vec::with_capacity((offsets.len() - 1) * heads);
        let mut rest = ctx;
        for w in offsets.windows(2) {
            let (start, len) = (w[0], w[1] - w[0]);
            let (seq_ctx, tail) = rest.split_at_mut(len * h);
            rest = tail;
            let mut view = MatMut::from_row_major_slice_mut(seq_ctx, len, h);
            for head in 0..heads {
                let (this, others) = view.split_at_col_mut(head_dim);
                tasks.push((start, len, head, this));
                view = others;
            }
        }
        let k = self.kernels;
        // Longest sequences first, so the pool does not end on one big task.
        tasks.sort_by_key(|t| std::cmp::Reverse(t.1));
        tasks
            .into_par_iter()
            .for_each_init(Vec::<f32>::new, |scores, (start, len, head, out)| {
                let strided = |col: usize| {
                    let first = start * stride + col;
                    MatRef::from_row_major_slice_with_stride(
                        &qkv[first..first + (len - 1) * stride + head_dim],
                        len,
                        head_dim,
                        stride,
                    )
                };
                let q = strided(head * head_dim);
                let key = strided(h + head * head_dim);
                let v = strided(2 * h + head * head_dim);
                scores.resize(len * len, 0.0);
                let scores = &mut scores[..len * len];
                matmul(
                    MatMut::from_row_major_slice_mut(scores, len, len),
                    Accum::Replace,
                    q,
                    key.transpose(),
                    1.0,
                    Par::Seq,
                );
                k.softmax_rows(scores, len);
                matmul(
                    out,
                    Accum::Replace,
                    MatRef::from_row_major_slice(scores, len, len),
                    v,
                    1.0,
                    Par::Seq,
                );
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic pseudo-random BERT, serialized as safetensors.
    struct Tiny {
        config: String,
        tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
    }

    const H: usize = 8;
    const HEADS: usize = 2;
    const INTER: usize = 12;
    const LAYERS: usize = 2;
    const VOCAB: usize = 20;
    const MAXPOS: usize = 16;

    impl Tiny {
        fn new() -> Tiny {
            let mut seed = 0x2545_f491_u32;
            let mut rand = move |n: usize, scale: f32| -> Vec<f32> {
                (0..n)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        (seed as f32 / u32::MAX as f32 - 0.5) * 2.0 * scale
                    })
                    .collect()
            };
            let mut tensors = vec![
                (
                    "embeddings.word_embeddings.weight".to_owned(),
                    vec![VOCAB, H],
                    rand(VOCAB * H, 1.0),
                ),
                (
                    "embeddings.position_embeddings.weight".to_owned(),
                    vec![MAXPOS, H],
                    rand(MAXPOS * H, 0.5),
                ),
                (
                    "embeddings.token_type_embeddings.weight".to_owned(),
                    vec![2, H],
                    rand(2 * H, 0.5),
                ),
                (
                    "embeddings.LayerNorm.weight".to_owned(),
                    vec![H],
                    rand(H, 0.2).iter().map(|v| v + 1.0).collect(),
                ),
                (
                    "embeddings.LayerNorm.bias".to_owned(),
                    vec![H],
                    rand(H, 0.1),
                ),
            ];
            for l in 0..LAYERS {
                let p = format!("encoder.layer.{l}.");
                for (name, shape) in [
                    ("attention.self.query.weight", vec![H, H]),
                    ("attention.self.query.bias", vec![H]),
                    ("attention.self.key.weight", vec![H, H]),
                    ("attention.self.key.bias", vec![H]),
                    ("attention.self.value.weight", vec![H, H]),
                    ("attention.self.value.bias", vec![H]),
                    ("attention.output.dense.weight", vec![H, H]),
                    ("attention.output.dense.bias", vec![H]),
                    ("intermediate.dense.weight", vec![INTER, H]),
                    ("intermediate.dense.bias", vec![INTER]),
                    ("output.dense.weight", vec![H, INTER]),
                    ("output.dense.bias", vec![H]),
                ] {
                    let n = shape.iter().product();
                    tensors.push((format!("{p}{name}"), shape, rand(n, 0.6)));
                }
                for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
                    tensors.push((
                        format!("{p}{ln}.weight"),
                        vec![H],
                        rand(H, 0.2).iter().map(|v| v + 1.0).collect(),
                    ));
                    tensors.push((format!("{p}{ln}.bias"), vec![H], rand(H, 0.1)));
                }
            }
            let config = format!(
                r#"{{"hidden_size": {H}, "num_attention_heads": {HEADS}, "num_hidden_layers": {LAYERS},
                "intermediate_size": {INTER}, "max_position_embeddings": {MAXPOS}, "vocab_size": {VOCAB},
                "layer_norm_eps": 1e-12, "hidden_act": "gelu"}}"#
            );
            Tiny { config, tensors }
        }

        fn get(&self, name: &str) -> &[f32] {
            &self.tensors.iter().find(|t| t.0 == name).unwrap().2
        }

        fn safetensors(&self) -> Vec<u8> {
            let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
                .tensors
                .iter()
                .map(|(n, s, v)| {
                    (
                        n.clone(),
                        s.clone(),
                        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    )
                })
                .collect();
            let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
                .iter()
                .map(|(n, s, b)| {
                    (
                        n.clone(),
                        safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
                    )
                })
                .collect();
            safetensors::tensor::serialize(views, None).unwrap()
        }

        /// The textbook forward of one sequence in f64: what Hugging Face's BertModel
        /// computes, followed by mean pooling.
        fn reference(&self, ids: &[u32]) -> Vec<f64> {
            let t = ids.len();
            let g = |n: &str| self.get(n).iter().map(|&v| v as f64).collect::<Vec<f64>>();
            let ln = |x: &mut [f64], gm: &[f64], bt: &[f64]| {
                for row in x.chunks_mut(H) {
                    let mean = row.iter().sum::<f64>() / H as f64;
                    let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / H as f64;
                    for (i, v) in row.iter_mut().enumerate() {
                        *v = (*v - mean) / (var + 1e-12).sqrt() * gm[i] + bt[i];
                    }
                }
            };
            // y = x W^T + b with W (out × in)
            let linear = |x: &[f64], w: &[f64], b: &[f64], inp: usize, out: usize| {
                let mut y = vec![0.0; x.len() / inp * out];
                for (r, row) in x.chunks(inp).enumerate() {
                    for o in 0..out {
                        y[r * out + o] =
                            b[o] + (0..inp).map(|i| row[i] * w[o * inp + i]).sum::<f64>();
                    }
                }
                y
            };
            let (we, pe, te) = (
                g("embeddings.word_embeddings.weight"),
                g("embeddings.position_embeddings.weight"),
                g("embeddings.token_type_embeddings.weight"),
            );
            let mut x = vec![0.0; t * H];
            for (p, &id) in ids.iter().enumerate() {
                for i in 0..H {
                    x[p * H + i] = we[id as usize * H + i] + pe[p * H + i] + te[i];
                }
            }
            ln(
                &mut x,
                &g("embeddings.LayerNorm.weight"),
                &g("embeddings.LayerNorm.bias"),
            );
            let d = H / HEADS;
            for l in 0..LAYERS {
                let p = format!("encoder.layer.{l}.");
                let w = |n: &str| g(&format!("{p}{n}"));
                let q = linear(
                    &x,
                    &w("attention.self.query.weight"),
                    &w("attention.self.query.bias"),
                    H,
                    H,
                );
                let k = linear(
                    &x,
                    &w("attention.self.key.weight"),
                    &w("attention.self.key.bias"),
                    H,
                    H,
                );
                let v = linear(
                    &x,
                    &w("attention.self.value.weight"),
                    &w("attention.self.value.bias"),
                    H,
                    H,
                );
                let mut ctx = vec![0.0; t * H];
                for hd in 0..HEADS {
                    for i in 0..t {
                        let scores: Vec<f64> = (0..t)
                            .map(|j| {
                                (0..d)
                                    .map(|c| q[i * H + hd * d + c] * k[j * H + hd * d + c])
                                    .sum::<f64>()
                                    / (d as f64).sqrt()
                            })
                            .collect();
                        let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                        let z: f64 = e.iter().sum();
                        for c in 0..d {
                            ctx[i * H + hd * d + c] =
                                (0..t).map(|j| e[j] / z * v[j * H + hd * d + c]).sum();
                        }
                    }
                }
                let a = linear(
                    &ctx,
                    &w("attention.output.dense.weight"),
                    &w("attention.output.dense.bias"),
                    H,
                    H,
                );
                for (xi, ai) in x.iter_mut().zip(&a) {
                    *xi += ai;
                }
                ln(
                    &mut x,
                    &w("attention.output.LayerNorm.weight"),
                    &w("attention.output.LayerNorm.bias"),
                );
                let mut m = linear(
                    &x,
                    &w("intermediate.dense.weight"),
                    &w("intermediate.dense.bias"),
                    H,
                    INTER,
                );
                for v in &mut m {
                    *v = 0.5 * *v * (1.0 + erf64(*v / std::f64::consts::SQRT_2));
                }
                let o = linear(
                    &m,
                    &w("output.dense.weight"),
                    &w("output.dense.bias"),
                    INTER,
                    H,
                );
                for (xi, oi) in x.iter_mut().zip(&o) {
                    *xi += oi;
                }
                ln(
                    &mut x,
                    &w("output.LayerNorm.weight"),
                    &w("output.LayerNorm.bias"),
                );
            }
            (0..H)
                .map(|i| (0..t).map(|p| x[p * H + i]).sum::<f64>() / t as f64)
                .collect()
        }
    }

    fn erf64(x: f64) -> f64 {
        // Taylor series; enough terms for |x| < 6.
        let mut sum = 0.0;
        let mut term = x;
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn packed_forward_matches_per_sequence_reference() {
        let tiny = Tiny::new();
        let model = Bert::load(&tiny.config, &tiny.safetensors(), Precision::F32).unwrap();
        let mut seqs: Vec<Vec<u32>> = vec![
            vec![1, 5, 7, 2],
            vec![1, 19, 3, 3, 8, 11, 4, 0, 2, 9, 13, 2],
            vec![1, 2],
            (0..MAXPOS as u32).map(|i| i % VOCAB as u32).collect(),
        ];
        // More rows than one block of f32 rows (256), so the blocks of a layer are split
        // over the threads too.
        seqs.extend((0..20u32).map(|s| {
            (0..MAXPOS as u32 - s % 3)
                .map(|i| (i * 7 + s) % VOCAB as u32)
                .collect()
        }));
        assert!(seqs.iter().map(Vec::len).sum::<usize>() > 256);
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for threads in [1, 2] {
            let got = pool.install(|| model.mean_pooled(&refs, threads)).unwrap();
            assert_eq!(got.len(), seqs.len());
            for (s, g) in seqs.iter().zip(&got) {
                let want = tiny.reference(s);
                for (a, b) in g.iter().zip(&want) {
                    assert!((*a as f64 - b).abs() < 2e-5, "{a} vs {b} for {s:?}");
                }
            }
            // The same sequence alone gives the same vector as inside a batch.
            let alone = pool
                .install(|| model.mean_pooled(&refs[1..2], threads))
                .unwrap();
            for (a, b) in alone[0].iter().zip(&got[1]) {
                assert!((a - b).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn rejects_out_of_range_inputs() {
        let tiny = Tiny::new();
        let model = Bert::load(&tiny.config, &tiny.safetensors(), Precision::F32).unwrap();
        assert!(model.mean_pooled(&[&[1, VOCAB as u32]], 1).is_err());
        let long: Vec<u32> = vec![1; MAXPOS + 1];
        assert!(model.mean_pooled(&[&long], 1).is_err());
        assert!(model.mean_pooled(&[&[]], 1).is_err());
        assert!(model.mean_pooled(&[], 1).unwrap().is_empty());
        assert!(Bert::load(&tiny.config, b"not safetensors", Precision::F32).is_err());
    }

    #[test]
    fn transpose_swaps_axes() {
        let w = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 × 3
        assert_eq!(transpose(&w, 2, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }

    #[test]
    fn config_rejects_what_the_forward_cannot_run() {
        let base = r#"{"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
            "intermediate_size": 16, "max_position_embeddings": 8, "vocab_size": 10"#;
        let ok: BertConfig = serde_json::from_str(&format!("{base}}}")).unwrap();
        assert!(ok.check().is_ok());
        let odd: BertConfig = serde_json::from_str(
            &base
                .replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3")
                .replace("vocab_size\": 10", "vocab_size\": 10}"),
        )
        .unwrap();
        assert!(odd.check().is_err());
        let act: BertConfig =
            serde_json::from_str(&format!("{base}, \"hidden_act\": \"relu\"}}")).unwrap();
        assert!(act.check().is_err());
    }
}
