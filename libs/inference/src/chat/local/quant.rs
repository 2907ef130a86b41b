//! ggml block formats (dequantized to f32 at load) and the 8-bit matrices decoding runs on.
//!
//! A [`Q8Matrix`] is ggml's Q8_0 (blocks of 32 signed bytes with one scale each) with the
//! bytes and the scales in two separate arrays. Its product with a vector quantizes the
//! vector the same way and sums `i8 × i8` products in integers, block by block, as
//! llama.cpp's `ggml_vec_dot_q8_0_q8_0`: with AVX2 one block is `vpsignb`, `vpmaddubsw`,
//! `vpmaddwd` and one float FMA. Decoding one token reads every weight once, so it is bound
//! by memory bandwidth: a quarter of f32's bytes is most of the speed.

use rayon::prelude::*;

use super::gguf::DType;

/// Elements of a Q8 block.
pub(crate) const QK: usize = 32;

/// IEEE half to f32.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = if exp == 0 {
        // Zero or subnormal: man · 2^-24.
        let v = man as f32 * 5.960_464_5e-8;
        return if sign != 0 { -v } else { v };
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

pub(crate) fn half(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Dequantizes `raw` (of `dtype`) to f32.
pub(crate) fn dequantize(dtype: DType, raw: &[u8]) -> Vec<f32> {
    let (per, bytes) = dtype.block();
    let blocks = raw.len() / bytes;
    let mut out = vec![0f32; blocks * per];
    // Large tensors dequantize in parallel; each task owns whole blocks.
    const BLOCKS_PER_TASK: usize = 256;
    out.par_chunks_mut(BLOCKS_PER_TASK * per)
        .zip(raw.par_chunks(BLOCKS_PER_TASK * bytes))
        .for_each(|(out, raw)| {
            for (y, b) in out.chunks_exact_mut(per).zip(raw.chunks_exact(bytes)) {
                dequantize_block(dtype, b, y);
            }
        });
    out
}

fn dequantize_block(dtype: DType, b: &[u8], y: &mut [f32]) {
    match dtype {
        DType::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        DType::F16 => y[0] = half(b, 0),
        DType::BF16 => y[0] = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16),
        DType::Q8_0 => {
            let d = half(b, 0);
            for (v, &q) in y.iter_mut().zip(&b[2..34]) {
                *v = d * f32::from(q as i8);
            }
        }
        DType::Q4_0 => {
            let d = half(b, 0);
            let qs = &b[2..18];
            for j in 0..16 {
                y[j] = d * (f32::from(qs[j] & 0x0f) - 8.0);
                y[j + 16] = d * (f32::from(qs[j] >> 4) - 8.0);
            }
        }
        DType::Q4_1 => {
            let (d, m) = (half(b, 0), half(b, 2));
            let qs = &b[4..20];
            for j in 0..16 {
                y[j] = d * f32::from(qs[j] & 0x0f) + m;
                y[j + 16] = d * f32::from(qs[j] >> 4) + m;
            }
        }
        DType::Q5_0 => {
            let d = half(b, 0);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            let qs = &b[6..22];
            for j in 0..16 {
                let h0 = (((qh >> j) << 4) & 0x10) as u8;
                let h1 = ((qh >> (j + 12)) & 0x10) as u8;
                y[j] = d * (f32::from((qs[j] & 0x0f) | h0) - 16.0);
                y[j + 16] = d * (f32::from((qs[j] >> 4) | h1) - 16.0);
            }
        }
        DType::Q4K => {
            let d = half(b, 0);
            let dmin = half(b, 2);
            let scales = &b[4..16];
            let qs = &b[16..144];
            for (j, (y, q)) in y.chunks_exact_mut(64).zip(qs.chunks_exact(32)).enumerate() {
                let (sc1, m1) = scale_min_k4(2 * j, scales);
                let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
                let (d1, m1) = (d * f32::from(sc1), dmin * f32::from(m1));
                let (d2, m2) = (d * f32::from(sc2), dmin * f32::from(m2));
                let (lo, hi) = y.split_at_mut(32);
                for l in 0..32 {
                    lo[l] = d1 * f32::from(q[l] & 0x0f) - m1;
                    hi[l] = d2 * f32::from(q[l] >> 4) - m2;
                }
            }
        }
        DType::Q5K => {
            let d = half(b, 0);
            let dmin = half(b, 2);
            let scales = &b[4..16];
            let qh = &b[16..48];
            let qs = &b[48..176];
            for (j, (y, q)) in y.chunks_exact_mut(64).zip(qs.chunks_exact(32)).enumerate() {
                let (sc1, m1) = scale_min_k4(2 * j, scales);
                let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
                let (d1, m1) = (d * f32::from(sc1), dmin * f32::from(m1));
                let (d2, m2) = (d * f32::from(sc2), dmin * f32::from(m2));
                let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
                let (lo, hi) = y.split_at_mut(32);
                for l in 0..32 {
                    let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
                    let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
                    lo[l] = d1 * f32::from((q[l] & 0x0f) + h1) - m1;
                    hi[l] = d2 * f32::from((q[l] >> 4) + h2) - m2;
                }
            }
        }
        DType::Q6K => {
            let ql = &b[0..128];
            let qh = &b[128..192];
            let sc = &b[192..208];
            let d = half(b, 208);
            for n in 0..2 {
                let (ql, qh, sc) = (&ql[64 * n..], &qh[32 * n..], &sc[8 * n..]);
                let y = &mut y[128 * n..128 * (n + 1)];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    let s = |k: usize| d * f32::from(sc[k] as i8);
                    y[l] = s(is) * q1 as f32;
                    y[l + 32] = s(is + 2) * q2 as f32;
                    y[l + 64] = s(is + 4) * q3 as f32;
                    y[l + 96] = s(is + 6) * q4 as f32;
                }
            }
        }
    }
}

/// The 6-bit scale and min `j` of a Q4_K/Q5_K super-block.
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// A vector or matrix rows in Q8 blocks: `qs[i]` scaled by `d[i / 32]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Q8 {
    pub(crate) qs: Vec<i8>,
    pub(crate) d: Vec<f32>,
    /// For a quantized vector: each block's sum, `d · Σ qs` (the offset term of affine
    /// weights, see [`NibbleMatrix`](super::nibbles::NibbleMatrix)); empty for weights.
    pub(crate) s: Vec<f32>,
}

impl Q8 {
    /// Quantizes `x` (a multiple of 32 long) as ggml's `quantize_row_q8_0` does.
    #[cfg(test)]
    pub(crate) fn quantize(x: &[f32]) -> Q8 {
        let mut q = Q8::default();
        q.quantize_into(x);
        q
    }

    /// Quantizes `x` (a multiple of 32 long) as ggml's `quantize_row_q8_0` does, into
    /// existing buffers.
    pub(crate) fn quantize_into(&mut self, x: &[f32]) {
        self.qs.resize(x.len(), 0);
        self.d.resize(x.len() / QK, 0.0);
        self.s.resize(x.len() / QK, 0.0);
        for (((xb, qb), d), s) in x
            .chunks_exact(QK)
            .zip(self.qs.chunks_exact_mut(QK))
            .zip(self.d.iter_mut())
            .zip(self.s.iter_mut())
        {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = amax / 127.0;
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qb.iter_mut().zip(xb) {
                *q = (v * inv).round() as i8;
                sum += i32::from(*q);
            }
            *d = scale;
            *s = scale * sum as f32;
        }
    }
}

/// A row-major `rows × cols` matrix in Q8 blocks (each row a whole number of blocks).
#[derive(Debug, Clone)]
pub(crate) struct Q8Matrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: Q8,
}

impl Q8Matrix {
    pub(crate) fn from_f32(w: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        let mut data = Q8 {
            qs: vec![0; w.len()],
            d: vec![0.0; w.len() / QK],
            s: Vec::new(),
        };
        data.qs
            .par_chunks_mut(cols * 64)
            .zip(data.d.par_chunks_mut(cols / QK * 64))
            .zip(w.par_chunks(cols * 64))
            .for_each(|((qs, d), w)| {
                let mut part = Q8::default();
                part.quantize_into(w);
                qs.copy_from_slice(&part.qs);
                d.copy_from_slice(&part.d);
            });
        Q8Matrix { rows, cols, data }
    }

    /// An empty matrix with room for `rows` rows, filled by the `append_` functions.
    pub(crate) fn with_capacity(rows: usize, cols: usize) -> Q8Matrix {
        Q8Matrix {
            rows: 0,
            cols,
            data: Q8 {
                qs: Vec::with_capacity(rows * cols),
                d: Vec::with_capacity(rows * cols / QK),
                s: Vec::new(),
            },
        }
    }

    /// Appends rows of a GGUF Q8_0 tensor as they are (no requantization).
    pub(crate) fn append_q8_0(&mut self, raw: &[u8]) {
        for b in raw.chunks_exact(34) {
            self.data.d.push(half(b, 0));
            self.data.qs.extend(b[2..34].iter().map(|&q| q as i8));
        }
        self.rows = self.data.qs.len() / self.cols;
    }

    /// Appends f32 rows, quantized.
    pub(crate) fn append_f32(&mut self, w: &[f32]) {
        let part = Q8Matrix::from_f32(w, w.len() / self.cols, self.cols);
        self.data.qs.extend_from_slice(&part.data.qs);
        self.data.d.extend_from_slice(&part.data.d);
        self.rows = self.data.qs.len() / self.cols;
    }

    /// Takes a GGUF Q8_0 tensor as it is (no requantization).
    pub(crate) fn from_q8_0(raw: &[u8], rows: usize, cols: usize) -> Q8Matrix {
        let mut m = Q8Matrix::with_capacity(rows, cols);
        m.append_q8_0(raw);
        m
    }

    /// The dot product of row `r` with `x`.
    pub(crate) fn row_dot(&self, r: usize, x: &Q8, dots: Dots) -> f32 {
        let bpr = self.cols / QK;
        let mut out = [0f32];
        dots.rows(
            &self.data.qs[r * self.cols..(r + 1) * self.cols],
            &self.data.d[r * bpr..(r + 1) * bpr],
            &x.qs,
            &x.d,
            &mut out,
        );
        out[0]
    }

    /// Row `r` dequantized into `out`.
    pub(crate) fn row_f32(&self, r: usize, out: &mut [f32]) {
        let qs = &self.data.qs[r * self.cols..(r + 1) * self.cols];
        let d = &self.data.d[r * self.cols / QK..(r + 1) * self.cols / QK];
        for ((o, q), &d) in out.chunks_exact_mut(QK).zip(qs.chunks_exact(QK)).zip(d) {
            for (o, &q) in o.iter_mut().zip(q) {
                *o = d * f32::from(q);
            }
        }
    }
}

impl RowSlices for Q8Matrix {
    fn row_count(&self) -> usize {
        self.rows
    }

    fn rows_into(&self, r0: usize, x: &Q8, out: &mut [f32], dots: Dots) {
        let (cols, bpr) = (self.cols, self.cols / QK);
        let qs = &self.data.qs[r0 * cols..(r0 + out.len()) * cols];
        let d = &self.data.d[r0 * bpr..(r0 + out.len()) * bpr];
        dots.rows(qs, d, &x.qs, &x.d, out);
    }
}

/// A matrix whose rows multiply a quantized vector a slice of rows at a time.
pub(crate) trait RowSlices: Sync + Sized {
    fn row_count(&self) -> usize;

    /// Rows `r0..r0 + out.len()` times `x` into `out`.
    fn rows_into(&self, r0: usize, x: &Q8, out: &mut [f32], dots: Dots);

    /// `out = self · x` for a quantized `x`, rows split over the current rayon pool.
    fn matvec(&self, x: &Q8, out: &mut [f32], dots: Dots) {
        stacked_matvec(std::slice::from_ref(self), x, out, dots)
    }
}

/// `out = x` times the matrices `parts` stacked, their rows split over the current rayon
/// pool: a few tasks a thread (rayon's per-task cost is a microsecond or two, and a token
/// runs about a hundred products), each at most a few MB of weights.
pub(crate) fn stacked_matvec<M: RowSlices>(parts: &[M], x: &Q8, out: &mut [f32], dots: Dots) {
    let rows: usize = parts.iter().map(RowSlices::row_count).sum();
    let tasks = (rayon::current_num_threads() * 4).max(1);
    let rows_per_task = rows.div_ceil(tasks).clamp(16, 8192);
    let mut jobs = Vec::with_capacity(tasks + parts.len());
    let mut rest = &mut out[..rows];
    for part in parts {
        let (mine, tail) = rest.split_at_mut(part.row_count());
        rest = tail;
        for (t, chunk) in mine.chunks_mut(rows_per_task).enumerate() {
            jobs.push((part, t * rows_per_task, chunk));
        }
    }
    jobs.into_par_iter()
        .for_each(|(part, r0, out)| part.rows_into(r0, x, out, dots));
}

/// The dot-product kernel: AVX2 where the CPU has it, else portable code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dots {
    #[cfg(target_arch = "x86_64")]
    v3: Option<pulp::x86::V3>,
}

impl Dots {
    pub(crate) fn detect() -> Dots {
        Dots {
            #[cfg(target_arch = "x86_64")]
            v3: pulp::x86::V3::try_new(),
        }
    }

    /// AVX2 and FMA, where the CPU has them.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn v3(self) -> Option<pulp::x86::V3> {
        self.v3
    }

    /// `out[r] = Σ_blocks d_w d_x Σ w·x` for each row of `w_qs` (rows of `x_qs.len()`).
    pub(crate) fn rows(self, w_qs: &[i8], w_d: &[f32], x_qs: &[i8], x_d: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = self.v3 {
            simd.vectorize(avx2::Rows {
                simd,
                w_qs,
                w_d,
                x_qs,
                x_d,
                out,
            });
            return;
        }
        portable_rows(w_qs, w_d, x_qs, x_d, out)
    }
}

fn portable_rows(w_qs: &[i8], w_d: &[f32], x_qs: &[i8], x_d: &[f32], out: &mut [f32]) {
    let cols = x_qs.len();
    let bpr = x_d.len();
    for (r, o) in out.iter_mut().enumerate() {
        let w = &w_qs[r * cols..(r + 1) * cols];
        let wd = &w_d[r * bpr..(r + 1) * bpr];
        let mut acc = 0f32;
        for (((wb, xb), &dw), &dx) in w
            .chunks_exact(QK)
            .zip(x_qs.chunks_exact(QK))
            .zip(wd)
            .zip(x_d)
        {
            let s: i32 = wb
                .iter()
                .zip(xb)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
            acc += dw * dx * s as f32;
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use pulp::x86::V3;
    use pulp::{NullaryFnOnce, cast};
    use std::arch::x86_64::{__m256, __m256i};

    use super::QK;

    pub(super) struct Rows<'a> {
        pub(super) simd: V3,
        pub(super) w_qs: &'a [i8],
        pub(super) w_d: &'a [f32],
        pub(super) x_qs: &'a [i8],
        pub(super) x_d: &'a [f32],
        pub(super) out: &'a mut [f32],
    }

    impl NullaryFnOnce for Rows<'_> {
        type Output = ();

        #[inline(always)]
        fn call(self) {
            let Rows {
                simd,
                w_qs,
                w_d,
                x_qs,
                x_d,
                out,
            } = self;
            let cols = x_qs.len();
            let bpr = x_d.len();
            let (xb, _) = x_qs.as_chunks::<QK>();
            let xv: Vec<__m256i> = xb.iter().map(|b| cast(*b)).collect();
            let ones = simd.avx._mm256_set1_epi16(1);
            for (r, o) in out.iter_mut().enumerate() {
                let (wb, _) = w_qs[r * cols..(r + 1) * cols].as_chunks::<QK>();
                let wd = &w_d[r * bpr..(r + 1) * bpr];
                // Two accumulators: consecutive FMAs would otherwise wait on each other.
                let mut acc0 = simd.avx._mm256_setzero_ps();
                let mut acc1 = simd.avx._mm256_setzero_ps();
                let mut i = 0;
                while i + 1 < bpr {
                    acc0 = block(simd, ones, cast(wb[i]), xv[i], wd[i] * x_d[i], acc0);
                    acc1 = block(
                        simd,
                        ones,
                        cast(wb[i + 1]),
                        xv[i + 1],
                        wd[i + 1] * x_d[i + 1],
                        acc1,
                    );
                    i += 2;
                }
                if i < bpr {
                    acc0 = block(simd, ones, cast(wb[i]), xv[i], wd[i] * x_d[i], acc0);
                }
                *o = hsum(simd.avx._mm256_add_ps(acc0, acc1));
            }
        }
    }

    #[inline(always)]
    fn block(simd: V3, ones: __m256i, w: __m256i, x: __m256i, d: f32, acc: __m256) -> __m256 {
        // maddubs multiplies unsigned by signed bytes: |w| times x with w's sign.
        let aw = simd.avx2._mm256_sign_epi8(w, w);
        let sx = simd.avx2._mm256_sign_epi8(x, w);
        let pairs = simd.avx2._mm256_maddubs_epi16(aw, sx);
        let quads = simd.avx2._mm256_madd_epi16(pairs, ones);
        let f = simd.avx._mm256_cvtepi32_ps(quads);
        simd.fma._mm256_fmadd_ps(simd.avx._mm256_set1_ps(d), f, acc)
    }

    /// The sum of the eight lanes.
    #[inline(always)]
    pub(crate) fn hsum(v: __m256) -> f32 {
        let lanes: [f32; 8] = cast(v);
        ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
            + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        assert!((f16_to_f32(0x0001) - 5.960_464_5e-8).abs() < 1e-12);
        assert!((f16_to_f32(0x8001) + 5.960_464_5e-8).abs() < 1e-12);
        assert!((f16_to_f32(0x3555) - 0.333_25).abs() < 1e-4);
    }

    #[test]
    fn q8_matvec_matches_f32() {
        let (rows, cols) = (37, 96);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let m = Q8Matrix::from_f32(&w, rows, cols);
        let mut out = vec![0f32; rows];
        m.matvec(&Q8::quantize(&x), &mut out, Dots::detect());
        let mut portable = vec![0f32; rows];
        let xq = Q8::quantize(&x);
        portable_rows(&m.data.qs, &m.data.d, &xq.qs, &xq.d, &mut portable);
        for r in 0..rows {
            let want: f32 = (0..cols).map(|c| w[r * cols + c] * x[c]).sum();
            // Both sides rounded to 8 bits: a few thousandths per product, 96 products.
            assert!((out[r] - want).abs() < 0.1, "row {r}: {} vs {want}", out[r]);
            assert!((out[r] - portable[r]).abs() < 1e-4);
        }
    }

    #[test]
    fn q8_0_round_trip() {
        // One Q8_0 block: scale 0.5 (f16 0x3800), values -3..=28.
        let mut raw = vec![0x00, 0x38];
        raw.extend((0..32).map(|i| (i as i8 - 3) as u8));
        let y = dequantize(DType::Q8_0, &raw);
        assert_eq!(y[0], -1.5);
        assert_eq!(y[31], 14.0);
        let m = Q8Matrix::from_q8_0(&raw, 1, 32);
        let mut row = vec![0f32; 32];
        m.row_f32(0, &mut row);
        assert_eq!(row, y);
    }

    #[test]
    fn q4_1_dequantizes_by_hand() {
        // d = 0.5 (f16 0x3800), m = -2.0 (0xc000); byte j holds value j in its low nibble
        // and value j + 16 in its high one.
        let mut raw = vec![0x00, 0x38, 0x00, 0xc0];
        raw.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        let y = dequantize(DType::Q4_1, &raw);
        assert_eq!(y.len(), 32);
        // Low nibbles 0..=15: -2.0, -1.5, ..., 5.5; high nibbles 15..=0: 5.5, ..., -2.0.
        assert_eq!(y[0], -2.0);
        assert_eq!(y[1], -1.5);
        assert_eq!(y[15], 5.5);
        assert_eq!(y[16], 5.5);
        assert_eq!(y[17], 5.0);
        assert_eq!(y[31], -2.0);
        for j in 0..16 {
            assert_eq!(y[j], 0.5 * j as f32 - 2.0);
            assert_eq!(y[16 + j], 0.5 * (15 - j) as f32 - 2.0);
        }
    }
}
