//! Element-wise kernels of the decoder: RMS norm, GELU-tanh or SiLU gating, rotary embeddings. Like
//! the embedder's kernels they are plain loops compiled once per x86 level through
//! [`pulp::Arch::dispatch`].

use pulp::{Arch, Simd, WithSimd};

use crate::embed::kernels::exp;

/// Independent accumulators of a reduction: one AVX-512 register of f32.
const LANES: usize = 16;

struct RmsNormRows<'a> {
    x: &'a mut [f32],
    w: &'a [f32],
    eps: f32,
}

impl WithSimd for RmsNormRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let RmsNormRows { x, w, eps } = self;
        for row in x.chunks_exact_mut(w.len()) {
            let (chunks, rest) = row.as_chunks::<LANES>();
            let mut acc = [0f32; LANES];
            for c in chunks {
                for j in 0..LANES {
                    acc[j] += c[j] * c[j];
                }
            }
            let ss = acc.iter().sum::<f32>() + rest.iter().map(|v| v * v).sum::<f32>();
            let scale = 1.0 / (ss / w.len() as f32 + eps).sqrt();
            for (v, &g) in row.iter_mut().zip(w) {
                *v = *v * scale * g;
            }
        }
    }
}

/// The activation of a gated feed-forward block: `act(gate) · up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// GELU with the tanh approximation (Gemma's `gelu_pytorch_tanh`).
    GeluTanh,
    /// SiLU, `x · sigmoid(x)` (Llama's SwiGLU).
    Silu,
}

struct Gate<'a> {
    gate_up: &'a [f32],
    out: &'a mut [f32],
    act: Activation,
}

impl WithSimd for Gate<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Gate { gate_up, out, act } = self;
        let (g, u) = gate_up.split_at(out.len());
        let pairs = out.iter_mut().zip(g).zip(u);
        match act {
            Activation::GeluTanh => pairs.for_each(|((o, &g), &u)| *o = gelu_tanh(g) * u),
            Activation::Silu => pairs.for_each(|((o, &g), &u)| *o = silu(g) * u),
        }
    }
}

/// SiLU, `x / (1 + e^-x)`; exp clamps, so large |x| gives x or 0.
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// GELU with the tanh approximation (`gelu_pytorch_tanh`, Gemma's `hidden_activation`).
#[inline(always)]
pub(crate) fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2/π)
    let y = C * (x + 0.044_715 * x * x * x);
    // tanh(y) = 1 - 2 / (e^{2y} + 1); exp clamps, so large |y| gives ±1.
    let t = 1.0 - 2.0 / (exp(2.0 * y) + 1.0);
    0.5 * x * (1.0 + t)
}

/// Which dimensions of a head rotate together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RopeLayout {
    /// `(i, i + half)`: GPT-NeoX's and Hugging Face's `rotate_half` (Gemma's GGUF).
    Halves,
    /// `(2i, 2i + 1)`: the original, "normal" rotary layout. llama.cpp's converter permutes
    /// the rows of a Llama's query and key weights so that its heads come out this way.
    Pairs,
}

struct Rope<'a> {
    x: &'a mut [f32],
    cos: &'a [f32],
    sin: &'a [f32],
    layout: RopeLayout,
}

impl WithSimd for Rope<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Rope {
            x,
            cos,
            sin,
            layout,
        } = self;
        let half = cos.len();
        let turn = |(((a, b), &c), &s): (((&mut f32, &mut f32), &f32), &f32)| {
            let (x0, x1) = (*a, *b);
            *a = x0 * c - x1 * s;
            *b = x1 * c + x0 * s;
        };
        for head in x.chunks_exact_mut(2 * half) {
            match layout {
                RopeLayout::Halves => {
                    let (a, b) = head.split_at_mut(half);
                    a.iter_mut()
                        .zip(b.iter_mut())
                        .zip(cos)
                        .zip(sin)
                        .for_each(turn);
                }
                RopeLayout::Pairs => head
                    .as_chunks_mut::<2>()
                    .0
                    .iter_mut()
                    .map(|[a, b]| (a, b))
                    .zip(cos)
                    .zip(sin)
                    .for_each(turn),
            }
        }
    }
}

/// Rotary tables for positions `0..len`: `cos[p·half + i] = cos(p · base^(-2i/dim))`, and
/// the layout of the heads they turn.
#[derive(Debug)]
pub(crate) struct RopeTable {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
    layout: RopeLayout,
}

impl RopeTable {
    pub(crate) fn new(head_dim: usize, base: f64, len: usize, layout: RopeLayout) -> RopeTable {
        let half = head_dim / 2;
        let inv: Vec<f64> = (0..half)
            .map(|i| base.powf(-((2 * i) as f64) / head_dim as f64))
            .collect();
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for p in 0..len {
            for &f in &inv {
                let a = p as f64 * f;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
        RopeTable {
            half,
            cos,
            sin,
            layout,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cos.len() / self.half.max(1)
    }
}

/// The element-wise kernels, dispatched to the best SIMD level of this CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ops {
    arch: Arch,
}

impl Ops {
    pub(crate) fn detect() -> Ops {
        Ops { arch: Arch::new() }
    }

    /// `x = x / rms(x) · w` for each `w.len()`-wide row (w holds Gemma's `1 + weight`,
    /// which the GGUF converter stores).
    pub(crate) fn rms_norm_rows(self, x: &mut [f32], w: &[f32], eps: f32) {
        self.arch.dispatch(RmsNormRows { x, w, eps })
    }

    /// `out = act(gate) · up` for rows `[gate | up]` of `gate_up`, each `out` row `f` wide.
    pub(crate) fn gate(self, act: Activation, gate_up: &[f32], out: &mut [f32], f: usize) {
        for (o, gu) in out.chunks_exact_mut(f).zip(gate_up.chunks_exact(2 * f)) {
            self.arch.dispatch(Gate {
                gate_up: gu,
                out: o,
                act,
            })
        }
    }

    /// Rotates the heads of `x` (each `2 · half` wide, in the table's layout) to position
    /// `pos`.
    pub(crate) fn rope(self, x: &mut [f32], table: &RopeTable, pos: usize) {
        let h = table.half;
        self.arch.dispatch(Rope {
            x,
            cos: &table.cos[pos * h..(pos + 1) * h],
            sin: &table.sin[pos * h..(pos + 1) * h],
            layout: table.layout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_tanh_matches_formula() {
        for i in -600..=600 {
            let x = i as f64 * 0.01;
            let want = 0.5
                * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh());
            let got = gelu_tanh(x as f32) as f64;
            assert!(
                (got - want).abs() < 1e-6 * (1.0 + x.abs()),
                "{x}: {got} vs {want}"
            );
        }
        assert!((gelu_tanh(100.0) - 100.0).abs() < 1e-4);
        assert!(gelu_tanh(-100.0).abs() < 1e-4);
    }

    #[test]
    fn rms_norm_and_gate() {
        let ops = Ops::detect();
        let mut x = vec![3.0, 4.0, 0.0, 0.0];
        ops.rms_norm_rows(&mut x, &[1.0, 2.0], 1e-6);
        let r = (12.5f32 + 1e-6).sqrt();
        assert!((x[0] - 3.0 / r).abs() < 1e-6 && (x[1] - 8.0 / r).abs() < 1e-6);
        assert_eq!(&x[2..], &[0.0, 0.0]);
        let gu = vec![1.0, 2.0, 10.0, 100.0];
        let mut out = vec![0.0; 2];
        ops.gate(Activation::GeluTanh, &gu, &mut out, 2);
        assert!((out[0] - gelu_tanh(1.0) * 10.0).abs() < 1e-5);
        assert!((out[1] - gelu_tanh(2.0) * 100.0).abs() < 1e-4);
        ops.gate(Activation::Silu, &gu, &mut out, 2);
        // silu(1) = 1 / (1 + e^-1), silu(2) = 2 / (1 + e^-2).
        assert!((out[0] - 0.731_058_6 * 10.0).abs() < 1e-5, "{out:?}");
        assert!((out[1] - 1.761_594_2 * 100.0).abs() < 1e-3, "{out:?}");
        assert!(silu(-100.0).abs() < 1e-6 && (silu(100.0) - 100.0).abs() < 1e-4);
    }

    #[test]
    fn rope_rotates_pairs() {
        let t = RopeTable::new(4, 10000.0, 3, RopeLayout::Halves);
        assert_eq!(t.len(), 3);
        let ops = Ops::detect();
        let mut x = vec![1.0, 0.0, 0.0, 1.0];
        ops.rope(&mut x, &t, 0);
        assert_eq!(x, vec![1.0, 0.0, 0.0, 1.0]);
        ops.rope(&mut x, &t, 1);
        // Pair 0 turns by 1 radian, pair 1 by 1/100.
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[2] - 1f32.sin()).abs() < 1e-6);
        assert!((x[1] + 0.01f32.sin()).abs() < 1e-6 && (x[3] - 0.01f32.cos()).abs() < 1e-6);
        // The same turns on interleaved pairs: (x0, x1) by 1 radian, (x2, x3) by 1/100.
        let t = RopeTable::new(4, 10000.0, 3, RopeLayout::Pairs);
        let mut x = vec![1.0, 0.0, 0.0, 1.0];
        ops.rope(&mut x, &t, 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[1] - 1f32.sin()).abs() < 1e-6);
        assert!((x[2] + 0.01f32.sin()).abs() < 1e-6 && (x[3] - 0.01f32.cos()).abs() < 1e-6);
    }
}
