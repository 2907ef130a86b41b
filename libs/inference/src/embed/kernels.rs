//! Element-wise kernels of the BERT forward pass: layer norm, bias + GELU, softmax, pooling.
//!
//! They are plain loops written so that the compiler can vectorize them: independent lanes
//! for reductions (float addition is not associative, so a single running sum would stay
//! scalar), no early exits, and polynomial `exp`/`erf` instead of libm calls. Each entry
//! point runs its loop through [`pulp::Arch::dispatch`], which compiles it once per x86
//! level (AVX-512, AVX2 + FMA, baseline) and picks the best one the CPU has at run time,
//! so the binary needs no `-C target-cpu` and these kernels need no `unsafe`. (`exp`
//! uses `mul_add`: one instruction where FMA exists, a libm call on the baseline level,
//! which only CPUs from before 2013 would take.)

use pulp::{Arch, Simd, WithSimd};

/// Width of the independent accumulators of reductions: one AVX-512 register of f32.
const LANES: usize = 16;

/// Defines a kernel as a struct whose `with_simd` holds the loop. pulp compiles
/// `with_simd` inside a function with the target's features enabled; it must be inlined
/// there (`#[inline(always)]`, and so must everything it calls) for the loop to be
/// vectorized with them. A closure would not do: its body stays a separate function
/// compiled for the baseline.
macro_rules! kernel {
    ($(#[$doc:meta])* $name:ident<$lt:lifetime> { $($field:ident: $ty:ty),* $(,)? } -> $out:ty $body:block) => {
        $(#[$doc])*
        struct $name<$lt> {
            $($field: $ty),*
        }

        impl WithSimd for $name<'_> {
            type Output = $out;

            #[inline(always)]
            fn with_simd<S: Simd>(self, _simd: S) -> $out {
                let $name { $($field),* } = self;
                $body
            }
        }
    };
}

kernel!(
    /// Row-wise layer norm, in place.
    LayerNormRows<'a> { x: &'a mut [f32], gamma: &'a [f32], beta: &'a [f32], eps: f32 } -> () {
        for row in x.chunks_exact_mut(gamma.len()) {
            layer_norm(row, gamma, beta, eps);
        }
    }
);

kernel!(
    /// `x = layer_norm(x + y + bias)` row by row.
    ResidualLayerNormRows<'a> {
        x: &'a mut [f32],
        y: &'a [f32],
        bias: &'a [f32],
        gamma: &'a [f32],
        beta: &'a [f32],
        eps: f32,
    } -> () {
        let dim = gamma.len();
        for (row, y_row) in x.chunks_exact_mut(dim).zip(y.chunks_exact(dim)) {
            for ((v, &y), &b) in row.iter_mut().zip(y_row).zip(bias) {
                *v += y + b;
            }
            layer_norm(row, gamma, beta, eps);
        }
    }
);

kernel!(
    /// `x = gelu(x + bias)` row by row.
    BiasGeluRows<'a> { x: &'a mut [f32], bias: &'a [f32] } -> () {
        for row in x.chunks_exact_mut(bias.len()) {
            for (v, &b) in row.iter_mut().zip(bias) {
                *v = gelu(*v + b);
            }
        }
    }
);

kernel!(
    /// Bias on fused q/k/v rows, queries scaled.
    QkvBiasRows<'a> { qkv: &'a mut [f32], bias: &'a [f32], q_scale: f32 } -> () {
        let q_width = bias.len() / 3;
        let (q_bias, kv_bias) = bias.split_at(q_width);
        for row in qkv.chunks_exact_mut(bias.len()) {
            let (q, kv) = row.split_at_mut(q_width);
            for (v, &b) in q.iter_mut().zip(q_bias) {
                *v = (*v + b) * q_scale;
            }
            for (v, &b) in kv.iter_mut().zip(kv_bias) {
                *v += b;
            }
        }
    }
);

kernel!(
    /// Row-wise softmax, in place.
    SoftmaxRows<'a> { x: &'a mut [f32], width: usize } -> () {
        for row in x.chunks_exact_mut(width) {
            softmax(row);
        }
    }
);

kernel!(
    /// `dst = a + b + c`.
    Sum3<'a> { dst: &'a mut [f32], a: &'a [f32], b: &'a [f32], c: &'a [f32] } -> () {
        for (((d, &a), &b), &c) in dst.iter_mut().zip(a).zip(b).zip(c) {
            *d = a + b + c;
        }
    }
);

kernel!(
    /// Mean of rows.
    MeanRows<'a> { rows: &'a [f32], dim: usize } -> Vec<f32> {
        mean_rows(rows, dim)
    }
);

/// The dispatcher of the kernels (which SIMD level this CPU has, detected once).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kernels {
    arch: Arch,
}

impl Kernels {
    pub(crate) fn detect() -> Kernels {
        Kernels { arch: Arch::new() }
    }

    /// Row-wise layer norm of `x` (rows as wide as `gamma`), in place.
    pub(crate) fn layer_norm_rows(self, x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        self.arch.dispatch(LayerNormRows {
            x,
            gamma,
            beta,
            eps,
        })
    }

    /// `x = layer_norm(x + y + bias)` row by row: the residual connection of a BERT block
    /// after its output projection `y`.
    pub(crate) fn residual_layer_norm_rows(
        self,
        x: &mut [f32],
        y: &[f32],
        bias: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
    ) {
        self.arch.dispatch(ResidualLayerNormRows {
            x,
            y,
            bias,
            gamma,
            beta,
            eps,
        })
    }

    /// `x = gelu(x + bias)` row by row (exact, erf-based GELU as in BERT).
    pub(crate) fn bias_gelu_rows(self, x: &mut [f32], bias: &[f32]) {
        self.arch.dispatch(BiasGeluRows { x, bias })
    }

    /// Adds the bias to fused query/key/value rows and scales the query part (the first
    /// `bias.len() / 3` columns) by `q_scale`, so attention scores need no scaling later.
    pub(crate) fn qkv_bias_rows(self, qkv: &mut [f32], bias: &[f32], q_scale: f32) {
        self.arch.dispatch(QkvBiasRows { qkv, bias, q_scale })
    }

    /// Softmax of every `width`-wide row of `x`, in place.
    pub(crate) fn softmax_rows(self, x: &mut [f32], width: usize) {
        self.arch.dispatch(SoftmaxRows { x, width })
    }

    /// `dst = a + b + c` element-wise (the three BERT input embeddings of one token).
    pub(crate) fn sum3(self, dst: &mut [f32], a: &[f32], b: &[f32], c: &[f32]) {
        self.arch.dispatch(Sum3 { dst, a, b, c })
    }

    /// Mean of the `dim`-wide rows of `rows`: mean pooling over the tokens of one sequence.
    pub(crate) fn mean_rows(self, rows: &[f32], dim: usize) -> Vec<f32> {
        self.arch.dispatch(MeanRows { rows, dim })
    }
}

/// Mean of the `dim`-wide rows of `rows` (all zeros when there are none).
#[inline(always)]
pub(crate) fn mean_rows(rows: &[f32], dim: usize) -> Vec<f32> {
    let mut acc = vec![0f32; dim];
    let mut n = 0usize;
    for row in rows.chunks_exact(dim) {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a += v;
        }
        n += 1;
    }
    if n > 0 {
        let inv = 1.0 / n as f32;
        for a in &mut acc {
            *a *= inv;
        }
    }
    acc
}

#[inline(always)]
fn sum_lanes(x: &[f32]) -> f32 {
    let (chunks, rest) = x.as_chunks::<LANES>();
    let mut acc = [0f32; LANES];
    for c in chunks {
        for j in 0..LANES {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

#[inline(always)]
fn sum_sq_dev_lanes(x: &[f32], mean: f32) -> f32 {
    let (chunks, rest) = x.as_chunks::<LANES>();
    let mut acc = [0f32; LANES];
    for c in chunks {
        for j in 0..LANES {
            let d = c[j] - mean;
            acc[j] += d * d;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>()
}

#[inline(always)]
fn max_lanes(x: &[f32]) -> f32 {
    let (chunks, rest) = x.as_chunks::<LANES>();
    let mut acc = [f32::NEG_INFINITY; LANES];
    for c in chunks {
        for j in 0..LANES {
            acc[j] = acc[j].max(c[j]);
        }
    }
    acc.iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

#[inline(always)]
fn layer_norm(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum_lanes(row) / n;
    let var = sum_sq_dev_lanes(row, mean) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    for ((v, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * rstd * g + b;
    }
}

#[inline(always)]
fn softmax(row: &mut [f32]) {
    let max = max_lanes(row);
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / sum_lanes(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// `exp(x)` for f32 in the Cephes way: `x = n ln2 + r`, a degree-6 polynomial for `e^r` on
/// `|r| <= ln2 / 2`, and `2^n` built in the exponent bits. About 1 ulp in the normal range;
/// below it the result is 0 (as a softmax over very negative scores wants), above it the
/// input is clamped (softmax arguments are `<= 0`, GELU's `exp(-x²)` too).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5·2^23 rounds to an integer in float arithmetic and leaves that integer in
    // the low mantissa bits: no float-to-int conversion, which would not vectorize well.
    const ROUND: f32 = 12_582_912.0;
    let underflow = x < -87.3;
    let x = x.clamp(-87.3, 88.3);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    let p = 1.987_569_1e-4f32
        .mul_add(r, 1.398_199_9e-3)
        .mul_add(r, 8.333_452e-3)
        .mul_add(r, 4.166_579_6e-2)
        .mul_add(r, 1.666_666_5e-1)
        .mul_add(r, 0.5);
    let y = (p * r).mul_add(r, r + 1.0);
    // 2^n: the biased exponent n + 127 shifted into place.
    let scale = f32::from_bits(t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    if underflow { 0.0 } else { y * scale }
}

/// `erf(x)` by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), the approximation
/// PyTorch's vectorized CPU `erf` uses.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_8;
    const A4: f32 = -1.453_152;
    const A5: f32 = 1.061_405_4;
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = ((((A5 * t + A4) * t + A3) * t + A2) * t + A1) * t;
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// GELU as BERT defines it: `x/2 (1 + erf(x/√2))`.
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf_f64(x: f64) -> f64 {
        // Taylor series; 200 terms are plenty in f64 for |x| <= 6.
        let mut sum = 0.0;
        let mut term = x;
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn exp_matches_std() {
        let mut worst = 0f64;
        for i in -8700..=8800 {
            let x = i as f32 * 0.01;
            let got = exp(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(1000.0).is_finite());
    }

    #[test]
    fn erf_and_gelu_match_reference() {
        // The series reference loses precision past |x| = 4; erf is ±1 within f32 there.
        for i in -400..=400 {
            let x = i as f64 * 0.01;
            let got = erf(x as f32) as f64;
            // A&S 7.1.26 is within 1.5e-7; f32 rounding of `1 - poly·exp` adds a few 1e-7.
            assert!((got - erf_f64(x)).abs() < 6e-7, "erf({x}) = {got}");
            let g = gelu(x as f32) as f64;
            let want = 0.5 * x * (1.0 + erf_f64(x / std::f64::consts::SQRT_2));
            assert!(
                (g - want).abs() < 1e-6 * (1.0 + x.abs()),
                "gelu({x}) = {g}, want {want}"
            );
        }
        for x in [4.5f32, 6.0, 10.0, 100.0] {
            assert!((erf(x) - 1.0).abs() < 1e-6 && (erf(-x) + 1.0).abs() < 1e-6);
        }
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(20.0) - 20.0).abs() < 1e-5);
        assert!(gelu(-20.0).abs() < 1e-5);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let k = Kernels::detect();
        let mut x: Vec<f32> = (0..3 * 37).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let orig = x.clone();
        k.softmax_rows(&mut x, 37);
        for (row, o) in x.chunks(37).zip(orig.chunks(37)) {
            let s: f32 = row.iter().sum();
            assert!((s - 1.0).abs() < 1e-6);
            let max_o = o.iter().cloned().fold(f32::MIN, f32::max);
            let denom: f64 = o.iter().map(|&v| ((v - max_o) as f64).exp()).sum();
            for (&p, &v) in row.iter().zip(o) {
                let want = ((v - max_o) as f64).exp() / denom;
                assert!((p as f64 - want).abs() < 1e-6);
            }
        }
        // Large magnitudes do not overflow.
        let mut big = vec![1000.0, 999.0, -1000.0];
        k.softmax_rows(&mut big, 3);
        assert!((big[0] - 0.7310586).abs() < 1e-6);
        assert_eq!(big[2], 0.0, "exp underflows to 0 as in torch");
    }

    #[test]
    fn layer_norm_normalizes_rows() {
        let k = Kernels::detect();
        let dim = 40;
        let mut x: Vec<f32> = (0..2 * dim).map(|i| (i as f32).sin() * 3.0 + 1.0).collect();
        let gamma = vec![2.0; dim];
        let beta = vec![0.5; dim];
        k.layer_norm_rows(&mut x, &gamma, &beta, 1e-12);
        for row in x.chunks(dim) {
            let vals: Vec<f32> = row.iter().map(|v| (v - 0.5) / 2.0).collect();
            let mean: f32 = vals.iter().sum::<f32>() / dim as f32;
            let var: f32 = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
            assert!(mean.abs() < 1e-5, "mean {mean}");
            assert!((var - 1.0).abs() < 1e-4, "var {var}");
        }
    }

    #[test]
    fn residual_layer_norm_adds_before_normalizing() {
        let k = Kernels::detect();
        let mut a = vec![1.0, 2.0, 3.0, 4.0];
        let y = vec![1.0, 1.0, 1.0, 1.0];
        let bias = vec![0.0, 1.0, 2.0, 3.0];
        let ones = vec![1.0; 4];
        let zeros = vec![0.0; 4];
        k.residual_layer_norm_rows(&mut a, &y, &bias, &ones, &zeros, 1e-12);
        let mut b = vec![2.0, 4.0, 6.0, 8.0];
        k.layer_norm_rows(&mut b, &ones, &zeros, 1e-12);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-6);
        }
    }

    #[test]
    fn qkv_bias_scales_only_queries() {
        let k = Kernels::detect();
        let mut qkv = vec![1.0; 6];
        let bias = vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        k.qkv_bias_rows(&mut qkv, &bias, 0.5);
        assert_eq!(qkv, vec![1.0, 1.0, 3.0, 3.0, 4.0, 4.0]);
    }

    #[test]
    fn mean_rows_averages_tokens() {
        let k = Kernels::detect();
        let rows = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(k.mean_rows(&rows, 2), vec![3.0, 4.0]);
        assert_eq!(k.mean_rows(&[], 2), vec![0.0, 0.0]);
    }
}
