//! The int8 layers' kernel for x86-64 CPUs with AVX2 and FMA but no AVX-512 VNNI (AMD Zen 2
//! and Zen 3, Intel Haswell to Comet Lake): [`super::int8`]'s quantization (weights per
//! output channel to i8, activations per row to u8 with a zero point) and its exact i32
//! sums, so the same layers as its VNNI kernel, bit for bit.
//!
//! The products are `vpmaddwd`: both operands widened to i16, two products summed into each
//! i32 lane, 16 multiply-adds per instruction against an f32 FMA's 8. `vpmaddubsw` would
//! take the u8 and i8 operands as they are, but its i16 sum of two products saturates
//! (255 · 127 · 2 > 32 767), which would make the sums inexact. It is exact with weights on
//! ±64 levels, and then about 1.35× faster on a Zen 3 (one `vpaddd` per 32 products instead
//! of two: this loop is bound by its count of vector instructions, not by the multipliers),
//! but that rounding lost two PDF pages of the quality benchmark's dev part, so this kernel
//! keeps full 8-bit weights (`bench/ingest/RESULTS.md`, session 35). The activations are
//! widened once, when they are quantized (a row of `kp` i16); the weights stay i8 in their
//! panels and are widened as they are loaded (`vpmovsxbw`; panels stored as i16 instead
//! measured no faster).
//!
//! Register tile: [`MR`] rows × [`NR`] columns in 12 of the 16 ymm registers, two for the
//! weights and one for the broadcast pair of activations.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m256i, _mm_loadu_si128, _mm_storeu_si128, _mm256_add_epi32, _mm256_castsi256_si128,
    _mm256_cvtepi8_epi16, _mm256_cvtepi32_ps, _mm256_cvtps_epi32, _mm256_fmadd_ps, _mm256_loadu_ps,
    _mm256_loadu_si256, _mm256_madd_epi16, _mm256_max_epi32, _mm256_max_ps, _mm256_min_epi32,
    _mm256_min_ps, _mm256_mul_ps, _mm256_mullo_epi32, _mm256_packs_epi32, _mm256_permute4x64_epi64,
    _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_ps, _mm256_setzero_si256, _mm256_storeu_ps,
    _mm256_sub_epi32,
};

use super::levels::{level, row_levels};

/// Columns of a packed panel and of a register tile: two vectors of 8 i32.
pub(crate) const NR: usize = 16;
/// Consecutive `k` of one column side by side in a panel: the two products `vpmaddwd`
/// sums per lane. `kp` is a multiple of it.
pub(crate) const K_STEP: usize = 2;
/// Rows of a register tile: `MR × 2` accumulators (the tails of a block take 1 to 5).
const MR: usize = 6;

/// Whether this CPU can run the kernel.
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// A layer's weights as [`super::int8::Int8Linear`] packed them for this kernel.
pub(crate) struct Panels<'a> {
    pub k: usize,
    /// `k` rounded up to [`K_STEP`].
    pub kp: usize,
    pub n: usize,
    /// Panels of [`NR`] columns, each `[kp / 2][NR][2]`; columns past `n` are zero.
    pub packed: &'a [i8],
    /// Per-column dequantization scales and `Σ_k q[k][o]`, padded to whole panels.
    pub scale: &'a [f32],
    pub wsum: &'a [i32],
}

/// `y = x W` for one block of `rows` rows of `x`: quantizes them into `xq` (u8 values
/// widened to i16, rows `kp` wide), `xs` and `xz`, then every column panel.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn block(
    w: &Panels<'_>,
    x: &[f32],
    rows: usize,
    xq: &mut [i16],
    xs: &mut [f32],
    xz: &mut [i32],
    y: &mut [f32],
) {
    let (k, kp, n) = (w.k, w.kp, w.n);
    assert!(
        x.len() == rows * k
            && xq.len() >= rows * kp
            && xs.len() == rows
            && xz.len() == rows
            && y.len() == rows * n
            && kp % K_STEP == 0
            && kp >= k
            && w.packed.len() == n.div_ceil(NR) * kp * NR
            && w.scale.len() == n.div_ceil(NR) * NR
            && w.wsum.len() == w.scale.len()
    );
    quantize_rows(x, k, &mut xq[..rows * kp], kp, xs, xz);
    for (panel, b) in w.packed.chunks_exact(kp * NR).enumerate() {
        let col = panel * NR;
        let cols = (n - col).min(NR);
        let scale = &w.scale[col..col + NR];
        let wsum = &w.wsum[col..col + NR];
        let mut r = 0;
        while r < rows {
            let a = &xq[r * kp..];
            let (s, z) = (&xs[r..], &xz[r..]);
            let out = &mut y[r * n + col..];
            r += match rows - r {
                MR.. => tile::<MR>(a, kp, b, s, z, scale, wsum, out, n, cols),
                5 => tile::<5>(a, kp, b, s, z, scale, wsum, out, n, cols),
                4 => tile::<4>(a, kp, b, s, z, scale, wsum, out, n, cols),
                3 => tile::<3>(a, kp, b, s, z, scale, wsum, out, n, cols),
                2 => tile::<2>(a, kp, b, s, z, scale, wsum, out, n, cols),
                _ => tile::<1>(a, kp, b, s, z, scale, wsum, out, n, cols),
            };
        }
    }
}

/// [`super::int8`]'s quantization of each `k`-wide row of `x` (`v ≈ s (q - z)`, `q` in
/// 0..=255, the same arithmetic so the same `q`), stored as i16 in rows `kp` wide (the
/// padding meets zero weights).
#[target_feature(enable = "avx2,fma")]
fn quantize_rows(x: &[f32], k: usize, xq: &mut [i16], kp: usize, xs: &mut [f32], xz: &mut [i32]) {
    for (((row, q), s), z) in x
        .chunks_exact(k)
        .zip(xq.chunks_exact_mut(kp))
        .zip(xs)
        .zip(xz)
    {
        let (chunks, rest) = row.as_chunks::<8>();
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for c in chunks {
            // SAFETY: `c` is 8 f32 long.
            let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            lo = _mm256_min_ps(lo, v);
            hi = _mm256_max_ps(hi, v);
        }
        let (mut lanes_lo, mut lanes_hi) = ([0f32; 8], [0f32; 8]);
        // SAFETY: both arrays are 8 f32 long.
        unsafe {
            _mm256_storeu_ps(lanes_lo.as_mut_ptr(), lo);
            _mm256_storeu_ps(lanes_hi.as_mut_ptr(), hi);
        }
        let lo = lanes_lo.iter().chain(rest).fold(0f32, |m, &v| m.min(v));
        let hi = lanes_hi.iter().chain(rest).fold(0f32, |m, &v| m.max(v));
        let (scale, inv, zero) = row_levels(lo, hi);
        *s = scale;
        *z = zero as i32;
        let (vinv, vzero) = (_mm256_set1_ps(inv), _mm256_set1_ps(zero));
        let (top, bottom) = (_mm256_set1_epi32(255), _mm256_setzero_si256());
        let (q_chunks, q_rest) = q[..k].as_chunks_mut::<8>();
        for (c, d) in chunks.iter().zip(q_chunks) {
            // SAFETY: `c` is 8 f32 long.
            let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            // Rounds to nearest even (the default MXCSR mode), as `round_ties_even` below.
            let i = _mm256_cvtps_epi32(_mm256_fmadd_ps(v, vinv, vzero));
            let i = _mm256_min_epi32(_mm256_max_epi32(i, bottom), top);
            // Eight i32 in 0..=255 to i16: `packs` works per 128-bit half
            // ([0..4, 0..4 | 4..8, 4..8]); the permute puts 0..4 and 4..8 side by side.
            let packed = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packs_epi32(i, i));
            // SAFETY: `d` is 8 i16 (16 bytes) long.
            unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), _mm256_castsi256_si128(packed)) }
        }
        for (d, &v) in q_rest.iter_mut().zip(rest) {
            *d = level(v, inv, zero) as i16;
        }
    }
}

/// One register tile: `R` rows of widened activations (`a`, rows `kp` apart) times one
/// packed panel `b`, dequantized into `R` rows of `out` (`ldo` apart; only the first `cols`
/// columns are written). Returns `R`.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile<const R: usize>(
    a: &[i16],
    kp: usize,
    b: &[i8],
    a_scale: &[f32],
    a_zero: &[i32],
    w_scale: &[f32],
    wsum: &[i32],
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) -> usize {
    assert!(
        a.len() >= (R - 1) * kp + kp
            && b.len() == kp * NR
            && a_scale.len() >= R
            && a_zero.len() >= R
            && w_scale.len() == NR
            && wsum.len() == NR
            && cols <= NR
            && out.len() >= (R - 1) * ldo + cols
    );
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for step in 0..kp / K_STEP {
        // SAFETY: `step * NR * 2 + 32 <= kp * NR = b.len()`.
        let (b0, b1) = unsafe {
            let p = b.add(step * NR * K_STEP);
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(p.add(16).cast())),
            )
        };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `r * kp + step * 2 + 2 <= R * kp <= a.len()`.
            let pair = unsafe { a.add(r * kp + step * K_STEP).cast::<i32>().read_unaligned() };
            let av = _mm256_set1_epi32(pair);
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(av, b1));
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        dequantize_row(
            acc,
            a_scale[r],
            a_zero[r],
            w_scale,
            wsum,
            &mut out[r * ldo..r * ldo + cols],
        );
    }
    R
}

/// One row of exact i32 sums for a panel's columns back to f32 into `out` (the panel's live
/// columns of the row): `(Σ q w − z Σ w) · s_row · s_column`, as [`super::int8`] does.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dequantize_row(
    acc: &[__m256i; 2],
    a_scale: f32,
    a_zero: i32,
    w_scale: &[f32],
    wsum: &[i32],
    out: &mut [f32],
) {
    let cols = out.len();
    assert!(w_scale.len() == NR && wsum.len() == NR && cols <= NR);
    let sa = _mm256_set1_ps(a_scale);
    let za = _mm256_set1_epi32(a_zero);
    for (v, &acc) in acc.iter().enumerate() {
        let first = v * 8;
        if first >= cols {
            break;
        }
        // SAFETY: `first + 8 <= NR`, the length of `wsum` and `w_scale`.
        let (ws, sw) = unsafe {
            (
                _mm256_loadu_si256(wsum.as_ptr().add(first).cast()),
                _mm256_loadu_ps(w_scale.as_ptr().add(first)),
            )
        };
        // Σ (q - z) w = Σ q w - z Σ w, exact in i32.
        let exact = _mm256_sub_epi32(acc, _mm256_mullo_epi32(za, ws));
        let val = _mm256_mul_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(sa, sw));
        let live = cols - first;
        if live >= 8 {
            // SAFETY: `first + 8 <= cols = out.len()`.
            unsafe { _mm256_storeu_ps(out[first..].as_mut_ptr(), val) }
        } else {
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` is 8 f32 long.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), val) }
            out[first..].copy_from_slice(&lanes[..live]);
        }
    }
}
