//! 4- and 5-bit weights for decoding, taken from the file's own blocks without
//! requantizing.
//!
//! Decoding one token reads every weight once, so its speed is the bytes a token reads. The
//! file stores most matrices in 4 or 5 bits (Q5_0, Q4_K, ...); widening them to 8 bits for
//! decoding, as [`Q8Matrix`](super::quant::Q8Matrix) does, reads 1.6× the bytes. A
//! [`NibbleMatrix`] keeps them in blocks of 32 affine values, `w = d·q + m` with `q` in
//! `0..16` (4-bit) or `0..32` (5-bit), which every such ggml type is exactly: Q4_0/Q5_0 are
//! `d·(q − 8)` and `d·(q − 16)`, Q4_1 is `d·q + m` as it stands, and each 32-value sub-block
//! of a Q4_K/Q5_K super-block is `d·sc·q − dmin·min`. The scales are kept as f16 (the file's own precision for Q4_0/Q5_0;
//! a Q4_K sub-block's `d·sc` rounds to 11 significant bits).
//!
//! The product with a vector quantized to [`Q8`] blocks is, per block,
//! `d_w·d_x·Σ q·x_q + m·d_x·Σ x_q`: the integer sum is one `vpmaddubsw` (q is unsigned, so no
//! sign juggling) and the offset term uses the block sums the quantizer keeps.

use super::gguf::DType;
use super::quant::{Dots, Q8, QK, RowSlices, half, scale_min_k4};

/// A row-major `rows × cols` matrix of 4- or 5-bit affine blocks of 32.
#[derive(Debug, Clone)]
pub(crate) struct NibbleMatrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    /// 16 bytes a block: byte `j` holds value `j` in its low nibble and `j + 16` in its high
    /// one (ggml's Q4_0/Q5_0 order).
    qs: Vec<u8>,
    /// The fifth bits (bit `j` of value `j`), one word a block; empty for 4-bit matrices.
    qh: Vec<u32>,
    /// Scale and offset of each block, f16; no offsets when every block's is
    /// `-symmetric · d` (Q4_0's 8, Q5_0's 16).
    d: Vec<u16>,
    m: Vec<u16>,
    symmetric: Option<f32>,
    five: bool,
}

impl NibbleMatrix {
    /// Takes a GGUF tensor of `rows × cols` in a 4- or 5-bit type as it is; `None` for any
    /// other type (or a row length that is not whole blocks).
    pub(crate) fn from_ggml(
        dtype: DType,
        raw: &[u8],
        rows: usize,
        cols: usize,
    ) -> Option<NibbleMatrix> {
        let five = match dtype {
            DType::Q4_0 | DType::Q4_1 | DType::Q4K => false,
            DType::Q5_0 | DType::Q5K => true,
            _ => return None,
        };
        let (per, bytes) = dtype.block();
        if !cols.is_multiple_of(per) || raw.len() != rows * cols / per * bytes {
            return None;
        }
        let symmetric = match dtype {
            DType::Q4_0 => Some(8.0),
            DType::Q5_0 => Some(16.0),
            _ => None,
        };
        let mut m = NibbleMatrix::with_capacity(rows, cols, five, symmetric);
        let mut q = [0u8; QK];
        for b in raw.chunks_exact(bytes) {
            match dtype {
                DType::Q4_0 => {
                    let d = half(b, 0);
                    nibbles(&b[2..18], &mut q);
                    m.push(&q, d, -8.0 * d);
                }
                DType::Q4_1 => {
                    nibbles(&b[4..20], &mut q);
                    m.push(&q, half(b, 0), half(b, 2));
                }
                DType::Q5_0 => {
                    let d = half(b, 0);
                    nibbles(&b[6..22], &mut q);
                    fifth_bits(u32::from_le_bytes([b[2], b[3], b[4], b[5]]), &mut q);
                    m.push(&q, d, -16.0 * d);
                }
                DType::Q4K | DType::Q5K => {
                    let (d, dmin) = (half(b, 0), half(b, 2));
                    let scales = &b[4..16];
                    let (qh, qs) = if five {
                        (&b[16..48], &b[48..176])
                    } else {
                        (&[][..], &b[16..144])
                    };
                    // Four groups of 64: low nibbles are sub-block 2j, high ones 2j + 1.
                    for (j, group) in qs.chunks_exact(32).enumerate() {
                        for (sub, shift) in [(2 * j, 0), (2 * j + 1, 4)] {
                            let (sc, mn) = scale_min_k4(sub, scales);
                            for (l, v) in q.iter_mut().enumerate() {
                                *v = (group[l] >> shift) & 0x0f;
                                if five && qh[l] & (1 << sub) != 0 {
                                    *v |= 0x10;
                                }
                            }
                            m.push(&q, d * f32::from(sc), -dmin * f32::from(mn));
                        }
                    }
                }
                _ => return None,
            }
        }
        Some(m)
    }

    /// An empty matrix with room for `rows` rows of 4-bit values (5-bit when `five`),
    /// filled by [`push`](Self::push). With `symmetric`, every block's offset is
    /// `-symmetric · d` and only scales are kept.
    pub(crate) fn with_capacity(
        rows: usize,
        cols: usize,
        five: bool,
        symmetric: Option<f32>,
    ) -> NibbleMatrix {
        let blocks = rows * cols / QK;
        NibbleMatrix {
            rows,
            cols,
            qs: Vec::with_capacity(blocks * QK / 2),
            qh: Vec::with_capacity(if five { blocks } else { 0 }),
            d: Vec::with_capacity(blocks),
            m: Vec::with_capacity(if symmetric.is_some() { 0 } else { blocks }),
            symmetric,
            five,
        }
    }

    /// Appends one block of values `q` (each below 16, or 32 for a 5-bit matrix), worth
    /// `d·q + m`; a symmetric matrix ignores `m`.
    pub(crate) fn push(&mut self, q: &[u8; QK], d: f32, m: f32) {
        for j in 0..QK / 2 {
            self.qs.push((q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4));
        }
        if self.five {
            let bits = q
                .iter()
                .enumerate()
                .fold(0u32, |acc, (j, &v)| acc | (u32::from(v >> 4) << j));
            self.qh.push(bits);
        }
        self.d.push(f32_to_f16(d));
        if self.symmetric.is_none() {
            self.m.push(f32_to_f16(m));
        }
    }

    /// Bytes read by one product (weights and scales).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.qs.len() + 4 * self.qh.len() + 2 * (self.d.len() + self.m.len())
    }
}

impl RowSlices for NibbleMatrix {
    fn row_count(&self) -> usize {
        self.rows
    }

    fn rows_into(&self, r0: usize, x: &Q8, out: &mut [f32], dots: Dots) {
        let bpr = self.cols / QK;
        let (b0, b1) = (r0 * bpr, (r0 + out.len()) * bpr);
        let rows = Rows {
            qs: &self.qs[b0 * QK / 2..b1 * QK / 2],
            qh: if self.qh.is_empty() {
                &[]
            } else {
                &self.qh[b0..b1]
            },
            d: &self.d[b0..b1],
            m: if self.m.is_empty() {
                &[]
            } else {
                &self.m[b0..b1]
            },
            symmetric: self.symmetric.unwrap_or(0.0),
        };
        dots.nibble_rows(rows, x, out);
    }
}

/// The blocks of some whole rows.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub(crate) qs: &'a [u8],
    pub(crate) qh: &'a [u32],
    pub(crate) d: &'a [u16],
    /// Empty when symmetric: every offset is then `-symmetric · d`.
    pub(crate) m: &'a [u16],
    pub(crate) symmetric: f32,
}

/// The 32 values of 16 ggml-ordered nibble bytes.
fn nibbles(b: &[u8], q: &mut [u8; QK]) {
    for j in 0..QK / 2 {
        q[j] = b[j] & 0x0f;
        q[j + QK / 2] = b[j] >> 4;
    }
}

/// Adds bit `j` of `bits` to value `j` as its fifth bit.
fn fifth_bits(bits: u32, q: &mut [u8; QK]) {
    for (j, v) in q.iter_mut().enumerate() {
        *v |= (((bits >> j) & 1) as u8) << 4;
    }
}

/// f32 to IEEE half, rounding to nearest even (overflow to infinity).
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7fff_ffff;
    if a >= 0x7f80_0000 {
        // Infinity or NaN.
        return sign | 0x7c00 | if a > 0x7f80_0000 { 0x200 } else { 0 };
    }
    if a >= 0x4780_0000 {
        // 65536 and above.
        return sign | 0x7c00;
    }
    if a < 0x3880_0000 {
        // Below 2^-14: a subnormal half, in units of 2^-24.
        let v = f32::from_bits(a) * 16_777_216.0;
        return sign | v.round_ties_even() as u16;
    }
    // Rebias the exponent (127 → 15) and round the mantissa from 23 to 10 bits.
    let r = a - 0x3800_0000;
    let rounded = r + 0x0fff + ((r >> 13) & 1);
    sign | (rounded >> 13) as u16
}

/// IEEE half to f32 without branches (for a loop the compiler vectorizes): the half's
/// exponent and mantissa land in an f32 whose exponent is 112 too small, which one multiply
/// fixes, subnormals included. Infinities and NaNs are not expected in scales.
#[inline(always)]
pub(crate) fn f16_to_f32_fast(h: u16) -> f32 {
    let magnitude = f32::from_bits(u32::from(h & 0x7fff) << 13) * f32::from_bits(0x7780_0000);
    f32::from_bits(magnitude.to_bits() | (u32::from(h & 0x8000) << 16))
}

/// Row `r`'s offset terms, `Σ m[b] · x_s[b]`.
#[inline(always)]
fn offsets(w: &Rows<'_>, r: usize, x: &Q8) -> f32 {
    let bpr = x.s.len();
    if w.m.is_empty() {
        // m = -symmetric · d.
        let d = &w.d[r * bpr..(r + 1) * bpr];
        -w.symmetric
            * d.iter()
                .zip(&x.s)
                .map(|(&d, &xs)| f16_to_f32_fast(d) * xs)
                .sum::<f32>()
    } else {
        w.m[r * bpr..(r + 1) * bpr]
            .iter()
            .zip(&x.s)
            .map(|(&m, &xs)| f16_to_f32_fast(m) * xs)
            .sum()
    }
}

impl Dots {
    /// `out[r] = Σ_blocks (d·d_x·Σ q·x_q + m·x_s)` for each row of `w`.
    pub(crate) fn nibble_rows(self, w: Rows<'_>, x: &Q8, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = self.v3() {
            simd.vectorize(avx2::NibbleRows { simd, w, x, out });
            return;
        }
        portable_rows(w, x, out)
    }
}

fn portable_rows(w: Rows<'_>, x: &Q8, out: &mut [f32]) {
    let bpr = x.d.len();
    let mut q = [0u8; QK];
    for (r, o) in out.iter_mut().enumerate() {
        let mut acc = offsets(&w, r, x);
        for (i, b) in (r * bpr..(r + 1) * bpr).enumerate() {
            nibbles(&w.qs[b * QK / 2..(b + 1) * QK / 2], &mut q);
            if let Some(&bits) = w.qh.get(b) {
                fifth_bits(bits, &mut q);
            }
            let s: i32 = q
                .iter()
                .zip(&x.qs[i * QK..(i + 1) * QK])
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
            acc += f16_to_f32_fast(w.d[b]) * x.d[i] * s as f32;
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use pulp::x86::V3;
    use pulp::{NullaryFnOnce, cast};
    use std::arch::x86_64::{__m128i, __m256, __m256i};

    use super::super::quant::avx2::hsum;
    use super::{Q8, QK, Rows, f16_to_f32_fast, offsets};

    pub(super) struct NibbleRows<'a> {
        pub(super) simd: V3,
        pub(super) w: Rows<'a>,
        pub(super) x: &'a Q8,
        pub(super) out: &'a mut [f32],
    }

    impl NullaryFnOnce for NibbleRows<'_> {
        type Output = ();

        #[inline(always)]
        fn call(self) {
            let NibbleRows { simd, w, x, out } = self;
            match (w.qh.is_empty(), w.m.is_empty()) {
                (true, true) => rows::<false, true>(simd, w, x, out),
                (true, false) => rows::<false, false>(simd, w, x, out),
                (false, true) => rows::<true, true>(simd, w, x, out),
                (false, false) => rows::<true, false>(simd, w, x, out),
            }
        }
    }

    /// Constants of the unpacking.
    #[derive(Clone, Copy)]
    struct Masks {
        ones: __m256i,
        low: __m256i,
        fifth: __m256i,
        /// Byte i of a broadcast word goes to lane i / 8...
        spread: __m256i,
        /// ...where every bit but bit i % 8 is then set.
        others: __m256i,
        all: __m256i,
    }

    /// Rows of 5-bit (`FIVE`) or 4-bit values, symmetric (`SYM`: the offsets are folded
    /// into each block's sum as `Σ (q − symmetric)·x`) or with offsets of their own.
    #[inline(always)]
    fn rows<const FIVE: bool, const SYM: bool>(simd: V3, w: Rows<'_>, x: &Q8, out: &mut [f32]) {
        let bpr = x.d.len();
        let (xb, _) = x.qs.as_chunks::<QK>();
        let xv: Vec<__m256i> = xb.iter().map(|b| cast(*b)).collect();
        let k = Masks {
            ones: simd.avx._mm256_set1_epi16(1),
            low: simd.avx._mm256_set1_epi8(0x0f),
            fifth: simd.avx._mm256_set1_epi8(0x10),
            spread: simd.avx._mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
            others: simd.avx._mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe),
            all: simd.avx._mm256_set1_epi64x(-1),
        };
        // Per block of x, `symmetric ·` the sums of x's values in the lanes a block's
        // products land in (four bytes a lane).
        let sym = simd.avx._mm256_set1_ps(w.symmetric);
        let bytes_one = simd.avx._mm256_set1_epi8(1);
        let xsum: Vec<__m256> = if SYM {
            xv.iter()
                .map(|&x| {
                    let pairs = simd.avx2._mm256_maddubs_epi16(bytes_one, x);
                    let quads = simd.avx2._mm256_madd_epi16(pairs, k.ones);
                    simd.avx
                        ._mm256_mul_ps(sym, simd.avx._mm256_cvtepi32_ps(quads))
                })
                .collect()
        } else {
            Vec::new()
        };
        let zero = simd.avx._mm256_setzero_ps();
        let mut dx = vec![0f32; bpr];
        let (qs, _) = w.qs.as_chunks::<{ QK / 2 }>();
        for (r, o) in out.iter_mut().enumerate() {
            let b0 = r * bpr;
            scales(simd, &w.d[b0..b0 + bpr], &x.d, &mut dx);
            // Symmetric offsets are folded into each block (`corr`).
            let offsets = if SYM { 0.0 } else { offsets(&w, r, x) };
            let qs = &qs[b0..b0 + bpr];
            let qh = if FIVE { &w.qh[b0..b0 + bpr] } else { &[][..] };
            let corr = |i: usize| SYM.then(|| xsum[i]);
            // Two accumulators: consecutive FMAs would otherwise wait on each other.
            let mut acc0 = zero;
            let mut acc1 = zero;
            let mut i = 0;
            while i + 1 < bpr {
                acc0 = block::<FIVE>(simd, k, qs[i], qh.get(i), xv[i], corr(i), dx[i], acc0);
                acc1 = block::<FIVE>(
                    simd,
                    k,
                    qs[i + 1],
                    qh.get(i + 1),
                    xv[i + 1],
                    corr(i + 1),
                    dx[i + 1],
                    acc1,
                );
                i += 2;
            }
            if i < bpr {
                acc0 = block::<FIVE>(simd, k, qs[i], qh.get(i), xv[i], corr(i), dx[i], acc0);
            }
            *o = hsum(simd.avx._mm256_add_ps(acc0, acc1)) + offsets;
        }
    }

    /// `dx[b] = d[b] · x_d[b]` with `d` in f16, eight at a time: the half's exponent and
    /// mantissa shifted into an f32 whose exponent is 112 too small, which one multiply
    /// fixes (see [`f16_to_f32_fast`](super::f16_to_f32_fast)).
    #[inline(always)]
    fn scales(simd: V3, d: &[u16], xd: &[f32], dx: &mut [f32]) {
        let (d8, d_rest) = d.as_chunks::<8>();
        let (x8, x_rest) = xd.as_chunks::<8>();
        let (o8, o_rest) = dx.as_chunks_mut::<8>();
        let magnitude = simd.avx._mm256_set1_epi32(0x7fff);
        let sign = simd.avx._mm256_set1_epi32(0x8000);
        let rebias = simd.avx._mm256_set1_ps(f32::from_bits(0x7780_0000));
        for ((d, x), o) in d8.iter().zip(x8).zip(o8) {
            let h = simd.avx2._mm256_cvtepu16_epi32(cast(*d));
            let bits = simd
                .avx2
                ._mm256_slli_epi32::<13>(simd.avx2._mm256_and_si256(h, magnitude));
            let abs = simd
                .avx
                ._mm256_mul_ps(simd.avx._mm256_castsi256_ps(bits), rebias);
            let signs = simd
                .avx2
                ._mm256_slli_epi32::<16>(simd.avx2._mm256_and_si256(h, sign));
            let v = simd
                .avx
                ._mm256_or_ps(abs, simd.avx._mm256_castsi256_ps(signs));
            *o = cast(simd.avx._mm256_mul_ps(v, cast(*x)));
        }
        for ((o, &d), &x) in o_rest.iter_mut().zip(d_rest).zip(x_rest) {
            *o = f16_to_f32_fast(d) * x;
        }
    }

    /// `acc + d · (Σ q·x − corr)` for one block of values `q` (nibbles `qs`, fifth bits
    /// `qh`), lane by lane; no correction for blocks with offsets of their own.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn block<const FIVE: bool>(
        simd: V3,
        k: Masks,
        qs: [u8; QK / 2],
        qh: Option<&u32>,
        x: __m256i,
        corr: Option<__m256>,
        d: f32,
        acc: __m256,
    ) -> __m256 {
        let v: __m128i = cast(qs);
        let both = simd
            .avx
            ._mm256_set_m128i(simd.sse2._mm_srli_epi16::<4>(v), v);
        let mut q = simd.avx2._mm256_and_si256(both, k.low);
        if FIVE && let Some(&bits) = qh {
            let word = simd.avx._mm256_set1_epi32(bits as i32);
            let bytes = simd.avx2._mm256_shuffle_epi8(word, k.spread);
            let set = simd
                .avx2
                ._mm256_cmpeq_epi8(simd.avx2._mm256_or_si256(bytes, k.others), k.all);
            q = simd
                .avx2
                ._mm256_or_si256(q, simd.avx2._mm256_and_si256(set, k.fifth));
        }
        let pairs = simd.avx2._mm256_maddubs_epi16(q, x);
        let quads = simd.avx2._mm256_madd_epi16(pairs, k.ones);
        let mut sums = simd.avx._mm256_cvtepi32_ps(quads);
        if let Some(corr) = corr {
            sums = simd.avx._mm256_sub_ps(sums, corr);
        }
        simd.fma
            ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(d), sums, acc)
    }
}

#[cfg(test)]
mod tests {
    use super::super::quant::{Q8, dequantize};
    use super::*;

    /// A deterministic byte stream (xorshift).
    fn bytes(n: usize, mut seed: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    }

    /// Random blocks of `dtype` with sane f16 scales at the offsets given.
    fn blocks(dtype: DType, count: usize, scale_at: &[usize]) -> Vec<u8> {
        let (_, size) = dtype.block();
        let mut raw = bytes(count * size, 0x9e37_79b9 + size as u64);
        for b in raw.chunks_exact_mut(size) {
            for &at in scale_at {
                // A positive half between 2^-7 and 2^-6.
                b[at] = b[at + 1];
                b[at + 1] = 0x20 | (b[at + 1] & 0x03);
            }
        }
        raw
    }

    #[test]
    fn matches_the_dequantized_weights() {
        // Rows of 20 blocks (Gemma's 640) leave a remainder after eight scales at a time.
        let cases = [
            (DType::Q4_0, vec![0], 640),
            (DType::Q4_1, vec![0, 2], 576),
            (DType::Q5_0, vec![0], 640),
            (DType::Q4K, vec![0, 2], 512),
            (DType::Q5K, vec![0, 2], 512),
        ];
        for (dtype, scale_at, cols) in cases {
            let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
            let xq = Q8::quantize(&x);
            let rows = 37;
            let (per, _) = dtype.block();
            let raw = blocks(dtype, rows * cols / per, &scale_at);
            let w = dequantize(dtype, &raw);
            let m = NibbleMatrix::from_ggml(dtype, &raw, rows, cols).expect("a nibble type");
            let mut fast = vec![0f32; rows];
            m.rows_into(0, &xq, &mut fast, Dots::detect());
            let mut portable = vec![0f32; rows];
            portable_rows(
                Rows {
                    qs: &m.qs,
                    qh: &m.qh,
                    d: &m.d,
                    m: &m.m,
                    symmetric: m.symmetric.unwrap_or(0.0),
                },
                &xq,
                &mut portable,
            );
            for r in 0..rows {
                let row = &w[r * cols..(r + 1) * cols];
                let want: f32 = row.iter().zip(&x).map(|(a, b)| a * b).sum();
                let scale: f32 = row.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
                // x is rounded to 8 bits and the scales to f16.
                assert!(
                    (fast[r] - want).abs() <= 0.01 * scale + 1e-4,
                    "{dtype:?} row {r}: {} vs {want}",
                    fast[r]
                );
                assert!((fast[r] - portable[r]).abs() <= 1e-4 * scale + 1e-5);
            }
        }
    }

    #[test]
    fn four_bit_matrices_read_fewer_bytes_than_five() {
        let raw4 = blocks(DType::Q4_0, 20, &[0]);
        let raw5 = blocks(DType::Q5_0, 20, &[0]);
        let m4 = NibbleMatrix::from_ggml(DType::Q4_0, &raw4, 1, 640).expect("Q4_0");
        let m5 = NibbleMatrix::from_ggml(DType::Q5_0, &raw5, 1, 640).expect("Q5_0");
        // Q4_0 and Q5_0 are symmetric: no offsets are kept.
        assert_eq!(m4.bytes(), 20 * 18);
        assert_eq!(m5.bytes(), 20 * 22);
        assert!(NibbleMatrix::from_ggml(DType::Q8_0, &[0; 34], 1, 32).is_none());
        assert!(NibbleMatrix::from_ggml(DType::Q4K, &[0; 144], 1, 640).is_none());
    }

    #[test]
    fn half_conversions_round_trip() {
        for h in (0u16..0x7c00).chain(0x8000..0xfc00) {
            let f = f16_to_f32_fast(h);
            assert_eq!(f, super::super::quant::f16_to_f32(h), "{h:#x}");
            assert_eq!(f32_to_f16(f), h, "{h:#x} -> {f}");
        }
        assert_eq!(f32_to_f16(1.0 + 1.0 / 4096.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 2.0 / 4096.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 4096.0), 0x3c01);
        assert_eq!(f32_to_f16(1.0 + 6.0 / 4096.0), 0x3c02);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(-1e-9), 0x8000);
    }
}
