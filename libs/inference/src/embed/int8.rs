//! Int8 linear layers for x86-64 CPUs with AVX-512 VNNI or AVX2: the fast path of
//! [`super::bert`].
//!
//! The dense layers (query/key/value, attention output, feed-forward up and down) are
//! almost all of a BERT forward pass's arithmetic. On the CPUs that have `vpdpbusd`
//! (u8 × i8 products summed four at a time into i32 lanes) they run here with 8-bit
//! operands, which does four times the multiply-adds per instruction of an f32 FMA; on
//! AMX tiles ([`super::amx`]) many more; on CPUs with only AVX2, `vpmaddwd`
//! ([`super::avx2`]) twice as many. All three kernels compute the same exact sums:
//! - weights are quantized once at load time, symmetrically per output channel
//!   (`w ≈ s_o · q`, `q ∈ [-127, 127]`), and packed in the order the kernel reads them;
//! - activations are quantized per row (token) at run time to the unsigned operand
//!   `vpdpbusd` wants, asymmetrically (a scale and a zero point per row); the zero point's
//!   contribution, `z · Σ_k q[k][o]`, is subtracted with the column sums precomputed;
//! - products accumulate exactly in i32 and are turned back into f32 with the row's and the
//!   column's scales, so the rest of the forward pass (bias, GELU, attention, layer norm)
//!   stays f32 and unchanged.
//!
//! Per-row activation scales matter: one token's outlier does not coarsen the others.
//! Measured on real text, the pooled embeddings stay within cosine 0.99 of the f32 path's
//! (`tests/it/minilm.rs`).
//!
//! The VNNI kernel is a register-blocked GEMM (the AVX2 one the same in 16 ymm registers):
//! a tile of [`MR`] rows × [`NR`] columns lives in 24 zmm accumulators while the whole reduction runs; a block of [`MC`] rows sweeps every
//! column panel, so its quantized rows stay in L1/L2 and the packed weights (under 0.6 MB
//! per layer for MiniLM) in L2. A call runs on one thread: [`super::bert`] hands each
//! thread blocks of rows, and runs a block through several layers in a row.
//!
//! `unsafe` is confined to this module and its kernels' (`amx.rs`, `avx2.rs`): calling the `#[target_feature]` functions (after
//! checking the CPU has the features) and the unaligned SIMD loads and stores, whose bounds
//! are checked once per block before the loops.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m512i, _mm_storeu_si128, _mm512_cvtepi32_epi8, _mm512_cvtepi32_ps, _mm512_cvtps_epi32,
    _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_loadu_si512,
    _mm512_mask_storeu_ps, _mm512_max_epi32, _mm512_max_ps, _mm512_min_epi32, _mm512_min_ps,
    _mm512_mul_ps, _mm512_mullo_epi32, _mm512_reduce_max_ps, _mm512_reduce_min_ps,
    _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_ps, _mm512_setzero_si512, _mm512_storeu_ps,
    _mm512_sub_epi32,
};

use super::levels::{level, row_levels};
use super::{amx, avx2};

/// zmm registers of accumulators per tile row: 16 i32 columns each.
const NV: usize = 4;
/// Columns of a packed panel and of a register tile.
const NR: usize = 16 * NV;
/// Rows of a register tile: `MR × NV` = 24 accumulators, plus `NV` weight vectors and one
/// broadcast, fit the 32 zmm registers.
const MR: usize = 6;
/// Rows per parallel task (a multiple of [`MR`]).
const MC: usize = 8 * MR;

/// Whether this CPU can run the VNNI kernel (and the AMX one, which dequantizes with it).
fn vnni() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// The instructions a layer's products run on; the packing of its weights follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    /// AMX tiles, dequantized by the VNNI code.
    Amx,
    /// AVX-512 `vpdpbusd`.
    Vnni,
    /// AVX2 `vpmaddwd` ([`super::avx2`]).
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs, if any.
    fn detect() -> Option<Kernel> {
        if vnni() {
            Some(if amx::available() {
                Kernel::Amx
            } else {
                Kernel::Vnni
            })
        } else if avx2::available() {
            Some(Kernel::Avx2)
        } else {
            None
        }
    }

    fn available(self) -> bool {
        match self {
            Kernel::Amx => vnni() && amx::available(),
            Kernel::Vnni => vnni(),
            Kernel::Avx2 => avx2::available(),
        }
    }

    /// Columns of a packed panel.
    fn panel_cols(self) -> usize {
        match self {
            Kernel::Amx | Kernel::Vnni => NR,
            Kernel::Avx2 => avx2::NR,
        }
    }

    /// Consecutive `k` of one column side by side in a panel.
    fn k_group(self) -> usize {
        match self {
            Kernel::Amx | Kernel::Vnni => 4,
            Kernel::Avx2 => avx2::K_STEP,
        }
    }

    /// What `k` is rounded up to: the reduction step, or a tile row on AMX.
    fn k_multiple(self) -> usize {
        match self {
            Kernel::Amx => amx::K_STEP,
            Kernel::Vnni | Kernel::Avx2 => self.k_group(),
        }
    }

    /// Rows quantized and multiplied at a time: whole AMX blocks on that path.
    fn block_rows(self) -> usize {
        match self {
            Kernel::Amx => 2 * amx::ROWS,
            Kernel::Vnni | Kernel::Avx2 => MC,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kernel::Amx => "int8-amx",
            Kernel::Vnni => "int8",
            Kernel::Avx2 => "int8-avx2",
        }
    }
}

/// A linear layer's weight (`y = x W`, `W` being `k × n`), quantized and packed for one
/// kernel. Only built where the CPU has one.
pub(crate) struct Int8Linear {
    k: usize,
    n: usize,
    /// `k` rounded up to the kernel's [`Kernel::k_multiple`].
    kp: usize,
    /// Panels of [`Kernel::panel_cols`] columns, each `[kp / g][cols][g]` (`g` =
    /// [`Kernel::k_group`] consecutive `k` of one column side by side); columns past `n`
    /// are zero.
    packed: Vec<i8>,
    /// Per-column dequantization scale, padded with zeros to whole panels.
    scale: Vec<f32>,
    /// Per-column `Σ_k q[k][o]`, for the activations' zero points.
    wsum: Vec<i32>,
    kernel: Kernel,
    /// Blocks of rows multiplied on the tiles: the tests' proof that an AMX layer used them.
    #[cfg(test)]
    tile_blocks: std::sync::atomic::AtomicUsize,
}

/// A thread's buffers for [`Int8Linear::matmul`]: the quantized rows of a block and their
/// scales and zero points. Reused from call to call so the hot loop does not allocate.
#[derive(Default)]
pub(crate) struct Scratch {
    xq: Vec<u8>,
    /// The AVX2 kernel's quantized rows, widened to i16.
    xw: Vec<i16>,
    xs: Vec<f32>,
    xz: Vec<i32>,
}

impl Int8Linear {
    /// Quantizes `w`, a row-major `k × n` matrix (input features × output features).
    /// None when the CPU lacks the instructions.
    pub(crate) fn new(w: &[f32], k: usize, n: usize) -> Option<Int8Linear> {
        if w.len() != k * n || k == 0 || n == 0 {
            return None;
        }
        Some(Self::with_kernel(w, k, n, Kernel::detect()?))
    }

    /// [`Int8Linear::new`] with the kernel chosen.
    fn with_kernel(w: &[f32], k: usize, n: usize, kernel: Kernel) -> Int8Linear {
        let (nr, g) = (kernel.panel_cols(), kernel.k_group());
        let kp = k.next_multiple_of(kernel.k_multiple());
        let panels = n.div_ceil(nr);
        let mut scale = vec![0f32; panels * nr];
        for row in w.chunks_exact(n) {
            for (s, &v) in scale.iter_mut().zip(row) {
                *s = s.max(v.abs());
            }
        }
        for s in &mut scale {
            *s /= 127.0;
        }
        let mut packed = vec![0i8; panels * kp * nr];
        let mut wsum = vec![0i32; panels * nr];
        for (kk, row) in w.chunks_exact(n).enumerate() {
            for (o, &v) in row.iter().enumerate() {
                let s = scale[o];
                let q = if s > 0.0 {
                    (v / s).round().clamp(-127.0, 127.0) as i8
                } else {
                    0
                };
                let (panel, col) = (o / nr, o % nr);
                packed[panel * kp * nr + (kk / g) * nr * g + col * g + kk % g] = q;
                wsum[o] += i32::from(q);
            }
        }
        Int8Linear {
            k,
            n,
            kp,
            packed,
            scale,
            wsum,
            kernel,
            #[cfg(test)]
            tile_blocks: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The kernel in use, for logs and tests: `"int8-amx"`, `"int8"` (VNNI) or
    /// `"int8-avx2"`.
    pub(crate) fn kind(&self) -> &'static str {
        self.kernel.name()
    }

    /// `y = x W` for `x` with `m` rows (`m × k`), into `y` (`m × n`), on the calling thread
    /// (the caller spreads blocks of rows over its threads; [`super::bert`] does). False
    /// (and `y` untouched) when the CPU lacks the instructions or the shapes do not match;
    /// callers treat that as an internal error.
    #[must_use]
    pub(crate) fn matmul(&self, x: &[f32], m: usize, y: &mut [f32], s: &mut Scratch) -> bool {
        if x.len() != m * self.k || y.len() != m * self.n || !self.kernel.available() {
            return false;
        }
        let mc = self.kernel.block_rows();
        for (y, x) in y.chunks_mut(mc * self.n).zip(x.chunks(mc * self.k)) {
            let rows = x.len() / self.k;
            s.xs.resize(rows, 0.0);
            s.xz.resize(rows, 0);
            let (xs, xz) = (&mut s.xs[..rows], &mut s.xz[..rows]);
            if self.kernel == Kernel::Avx2 {
                s.xw.resize(rows * self.kp, 0);
                let panels = avx2::Panels {
                    k: self.k,
                    kp: self.kp,
                    n: self.n,
                    packed: &self.packed,
                    scale: &self.scale,
                    wsum: &self.wsum,
                };
                // SAFETY: avx2 and fma are present (`Kernel::available`, checked above);
                // `block` checks its slice bounds itself.
                unsafe { avx2::block(&panels, x, rows, &mut s.xw, xs, xz, y) }
                continue;
            }
            // AMX reads whole blocks of 32 rows: the rows past `rows` hold stale bytes
            // whose products land in rows of the tile that are not stored.
            let tile_rows = if self.kernel == Kernel::Amx {
                rows.next_multiple_of(amx::ROWS)
            } else {
                rows
            };
            s.xq.resize(tile_rows * self.kp, 0);
            // SAFETY: avx512f, avx512bw and avx512vnni are present (`Kernel::available`,
            // checked above); `block` checks its slice bounds itself.
            unsafe { self.block(x, rows, &mut s.xq, xs, xz, y) }
        }
        true
    }

    /// One block of rows: quantizes them into `xq`/`xs`, then every column panel.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn block(
        &self,
        x: &[f32],
        rows: usize,
        xq: &mut [u8],
        xs: &mut [f32],
        xz: &mut [i32],
        y: &mut [f32],
    ) {
        let (k, kp, n) = (self.k, self.kp, self.n);
        assert!(
            x.len() == rows * k
                && xq.len() >= rows * kp
                && xs.len() == rows
                && xz.len() == rows
                && y.len() == rows * n
                && self.packed.len() == n.div_ceil(NR) * kp * NR
                && self.scale.len() == n.div_ceil(NR) * NR
                && self.wsum.len() == self.scale.len()
        );
        quantize_rows(x, k, &mut xq[..rows * kp], kp, xs, xz);
        // `Kernel::Amx` is only chosen where `amx::available()` held, so the tiles
        // configure; were they refused, the VNNI loop below computes the same sums (its `kp`
        // need only be a multiple of 4).
        if self.kernel == Kernel::Amx
            && let Some(tiles) = amx::Tiles::configure()
        {
            return self.products_on_tiles(&tiles, rows, xq, xs, xz, y);
        }
        for (panel, b) in self.packed.chunks_exact(kp * NR).enumerate() {
            let col = panel * NR;
            let cols = (n - col).min(NR);
            let scale = &self.scale[col..col + NR];
            let wsum = &self.wsum[col..col + NR];
            let mut r = 0;
            while r < rows {
                let a = &xq[r * kp..];
                let (s, z) = (&xs[r..], &xz[r..]);
                let out = &mut y[r * n + col..];
                r += match rows - r {
                    6.. => tile::<6>(a, kp, b, s, z, scale, wsum, out, n, cols),
                    5 => tile::<5>(a, kp, b, s, z, scale, wsum, out, n, cols),
                    4 => tile::<4>(a, kp, b, s, z, scale, wsum, out, n, cols),
                    3 => tile::<3>(a, kp, b, s, z, scale, wsum, out, n, cols),
                    2 => tile::<2>(a, kp, b, s, z, scale, wsum, out, n, cols),
                    _ => tile::<1>(a, kp, b, s, z, scale, wsum, out, n, cols),
                };
            }
        }
    }

    /// [`Int8Linear::block`]'s products on AMX tiles: each block of 32 quantized rows (`xq`
    /// holds whole blocks) times each panel, then the same dequantization as the VNNI
    /// kernel's.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn products_on_tiles(
        &self,
        tiles: &amx::Tiles,
        rows: usize,
        xq: &[u8],
        xs: &[f32],
        xz: &[i32],
        y: &mut [f32],
    ) {
        let (kp, n) = (self.kp, self.n);
        assert!(xq.len() >= rows.next_multiple_of(amx::ROWS) * kp && NR == amx::COLS);
        let mut c = [0i32; amx::ROWS * NR];
        #[cfg(test)]
        self.tile_blocks.fetch_add(
            rows.div_ceil(amx::ROWS),
            std::sync::atomic::Ordering::Relaxed,
        );
        for first in (0..rows).step_by(amx::ROWS) {
            let live = (rows - first).min(amx::ROWS);
            let a = &xq[first * kp..];
            for (panel, b) in self.packed.chunks_exact(kp * NR).enumerate() {
                let col = panel * NR;
                let cols = (n - col).min(NR);
                tiles.panel(a, kp, kp, b, &mut c);
                for (r, sums) in c.chunks_exact(NR).take(live).enumerate() {
                    // SAFETY: `sums` is NR = 64 i32 long, four vectors of 16.
                    let acc: [__m512i; NV] = std::array::from_fn(|v| unsafe {
                        _mm512_loadu_si512(sums.as_ptr().add(v * 16).cast())
                    });
                    let row = first + r;
                    dequantize_row(
                        &acc,
                        xs[row],
                        xz[row],
                        &self.scale[col..col + NR],
                        &self.wsum[col..col + NR],
                        &mut y[row * n + col..row * n + col + cols],
                    );
                }
            }
        }
    }
}

/// Quantizes each `k`-wide row of `x` to u8, asymmetrically: `v ≈ s (q - z)` with `s` and
/// `z` from [`row_levels`] of the row's extremes `lo <= 0 <= hi` (zero included, so it is
/// exact). Rows of `xq` are `kp` wide (the padding meets
/// zero weights, so its value does not matter); the scales and zero points go to `xs`, `xz`.
///
/// Asymmetric because the feed-forward's second product reads GELU outputs, which are
/// `>= -0.17`: a symmetric range would leave half of the 256 levels unused there.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn quantize_rows(x: &[f32], k: usize, xq: &mut [u8], kp: usize, xs: &mut [f32], xz: &mut [i32]) {
    for (((row, q), s), z) in x
        .chunks_exact(k)
        .zip(xq.chunks_exact_mut(kp))
        .zip(xs)
        .zip(xz)
    {
        let (chunks, rest) = row.as_chunks::<16>();
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for c in chunks {
            // SAFETY: `c` is 16 f32 long.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            lo = _mm512_min_ps(lo, v);
            hi = _mm512_max_ps(hi, v);
        }
        let lo = rest.iter().fold(_mm512_reduce_min_ps(lo), |m, &v| m.min(v));
        let hi = rest.iter().fold(_mm512_reduce_max_ps(hi), |m, &v| m.max(v));
        let (scale, inv, zero) = row_levels(lo, hi);
        *s = scale;
        *z = zero as i32;
        let (vinv, vzero) = (_mm512_set1_ps(inv), _mm512_set1_ps(zero));
        let (top, bottom) = (_mm512_set1_epi32(255), _mm512_setzero_si512());
        let (q_chunks, q_rest) = q[..k].as_chunks_mut::<16>();
        for (c, d) in chunks.iter().zip(q_chunks) {
            // SAFETY: `c` is 16 f32 long.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            // Rounds to nearest even (the default MXCSR mode), as `round_ties_even` below.
            let i = _mm512_cvtps_epi32(_mm512_fmadd_ps(v, vinv, vzero));
            let i = _mm512_min_epi32(_mm512_max_epi32(i, bottom), top);
            // SAFETY: `d` is 16 bytes long.
            unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(i)) }
        }
        for (d, &v) in q_rest.iter_mut().zip(rest) {
            *d = level(v, inv, zero) as u8;
        }
    }
}

/// One register tile: `R` rows of quantized activations (`a`, rows `kp` apart) times one
/// packed panel `b`, dequantized into `R` rows of `out` (`ldo` apart; only the first `cols`
/// columns are written). Returns `R`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile<const R: usize>(
    a: &[u8],
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
    let mut acc = [[_mm512_setzero_si512(); NV]; R];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for step in 0..kp / 4 {
        // SAFETY: `step * NR * 4 + v * 64 + 64 <= kp * NR = b.len()`.
        let bv: [__m512i; NV] = std::array::from_fn(|v| unsafe {
            _mm512_loadu_si512(b.add(step * NR * 4 + v * 64).cast())
        });
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `r * kp + step * 4 + 4 <= R * kp <= a.len()`.
            let quad = unsafe { a.add(r * kp + step * 4).cast::<i32>().read_unaligned() };
            let av = _mm512_set1_epi32(quad);
            for (acc, &bv) in acc.iter_mut().zip(&bv) {
                *acc = _mm512_dpbusd_epi32(*acc, av, bv);
            }
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

/// One row of exact i32 sums for a panel's columns (`NV` vectors of 16) back to f32 into
/// `out` (the panel's live columns of the row): `(Σ q w − z Σ w) · s_row · s_column`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn dequantize_row(
    acc: &[__m512i; NV],
    a_scale: f32,
    a_zero: i32,
    w_scale: &[f32],
    wsum: &[i32],
    out: &mut [f32],
) {
    let cols = out.len();
    assert!(w_scale.len() == NR && wsum.len() == NR && cols <= NR);
    let sa = _mm512_set1_ps(a_scale);
    let za = _mm512_set1_epi32(a_zero);
    for (v, &acc) in acc.iter().enumerate() {
        let first = v * 16;
        if first >= cols {
            break;
        }
        // SAFETY: `first + 16 <= NR`, the length of `wsum` and `w_scale`.
        let (ws, sw) = unsafe {
            (
                _mm512_loadu_si512(wsum.as_ptr().add(first).cast()),
                _mm512_loadu_ps(w_scale.as_ptr().add(first)),
            )
        };
        // Σ (q - z) w = Σ q w - z Σ w, exact in i32.
        let exact = _mm512_sub_epi32(acc, _mm512_mullo_epi32(za, ws));
        let val = _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(sa, sw));
        let dst = out[first..].as_mut_ptr();
        let live = cols - first;
        if live >= 16 {
            // SAFETY: `first + 16 <= cols = out.len()`.
            unsafe { _mm512_storeu_ps(dst, val) }
        } else {
            // SAFETY: the mask writes only the `live` lanes, and `first + live = cols`.
            unsafe { _mm512_mask_storeu_ps(dst, (1u16 << live) - 1, val) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for r in 0..m {
            for o in 0..n {
                y[r * n + o] = (0..k).map(|i| x[r * k + i] * w[i * n + o]).sum();
            }
        }
        y
    }

    fn pseudo_random(len: usize, mut seed: u32) -> Vec<f32> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as f32 / u32::MAX as f32 - 0.5
            })
            .collect()
    }

    /// The kernels this CPU runs.
    fn kernels() -> Vec<Kernel> {
        let all = [Kernel::Amx, Kernel::Vnni, Kernel::Avx2];
        let here: Vec<Kernel> = all.into_iter().filter(|k| k.available()).collect();
        if here.len() < all.len() {
            eprintln!("int8 kernels not tested on this CPU: all but {here:?}");
        }
        here
    }

    /// What every kernel computes, in scalar code: the same quantization of the rows, the
    /// exact i32 sums with the layer's quantized weights, the same dequantization.
    fn scalar(lin: &Int8Linear, x: &[f32], m: usize) -> Vec<f32> {
        let (k, n, kp) = (lin.k, lin.n, lin.kp);
        let (nr, g) = (lin.kernel.panel_cols(), lin.kernel.k_group());
        let q = |kk: usize, o: usize| {
            i32::from(lin.packed[(o / nr) * kp * nr + (kk / g) * nr * g + (o % nr) * g + kk % g])
        };
        let mut y = vec![0f32; m * n];
        for (row, out) in x.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            let lo = row.iter().fold(0f32, |a, &v| a.min(v));
            let hi = row.iter().fold(0f32, |a, &v| a.max(v));
            let s = (hi - lo) / 255.0;
            let (inv, z) = if s > 0.0 {
                (1.0 / s, (-lo / s).round_ties_even().clamp(0.0, 255.0))
            } else {
                (0.0, 0.0)
            };
            let xq: Vec<i32> = row
                .iter()
                .map(|&v| v.mul_add(inv, z).round_ties_even().clamp(0.0, 255.0) as i32)
                .collect();
            for (o, y) in out.iter_mut().enumerate() {
                let sum: i32 = xq.iter().enumerate().map(|(kk, &a)| a * q(kk, o)).sum();
                *y = (sum - z as i32 * lin.wsum[o]) as f32 * (s * lin.scale[o]);
            }
        }
        y
    }

    #[test]
    fn every_kernel_computes_the_exact_sums_and_stays_near_the_f32_product() {
        // Shapes that cover partial panels, partial vector groups, k not a multiple of 2 or
        // 4, row tails of every size, more than one row block, and MiniLM's widest layer.
        for kernel in kernels() {
            for (m, k, n) in [
                (1, 4, 16),
                (7, 13, 70),
                (5, 384, 64),
                (MC + 11, 96, 150),
                (70, 1536, 40),
            ] {
                let x = pseudo_random(m * k, 7 + m as u32);
                let w = pseudo_random(k * n, 11 + n as u32);
                let lin = Int8Linear::with_kernel(&w, k, n, kernel);
                assert_eq!(lin.kind(), kernel.name());
                let mut y = vec![f32::NAN; m * n];
                assert!(lin.matmul(&x, m, &mut y, &mut Scratch::default()));
                assert!(
                    y == scalar(&lin, &x, m),
                    "{kernel:?} ({m},{k},{n}): not the scalar model's sums"
                );
                let want = reference(&x, &w, m, k, n);
                // Each operand is rounded by at most half a step of 1/127 of its row's or
                // column's largest magnitude (0.5 here).
                let tol = (k as f32).sqrt() * 0.5 * 0.5 / 127.0 * 2.0 + 1e-5;
                for (i, (g, e)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (g - e).abs() <= tol,
                        "{kernel:?} ({m},{k},{n})[{i}]: {g} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn new_picks_the_fastest_kernel_here() {
        let lin = Int8Linear::new(&pseudo_random(8 * 16, 1), 8, 16);
        assert_eq!(lin.map(|l| l.kernel), kernels().first().copied());
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "CI on an AMX host sets DOCCHAT_REQUIRE_AMX so that this test cannot skip"
    )]
    fn amx_tiles_give_the_vnni_kernels_exact_results() {
        if !Kernel::Amx.available() {
            eprintln!("no AMX-INT8 here (or DOCCHAT_EMBED_AMX=0): the tile path is not tested");
            assert!(
                std::env::var_os("DOCCHAT_REQUIRE_AMX").is_none(),
                "DOCCHAT_REQUIRE_AMX is set but the AMX path is not available"
            );
            return;
        }
        // Row counts below, at and past a block's 32 and a task's 64; k below a tile row's 64
        // and not a multiple of 4; partial panels.
        for (m, k, n) in [
            (1, 4, 16),
            (7, 13, 70),
            (16, 384, 64),
            (MC + 11, 96, 150),
            (200, 1536, 384),
        ] {
            let x = pseudo_random(m * k, 3 + m as u32);
            let w = pseudo_random(k * n, 5 + n as u32);
            let (tiles, vnni) = (
                Int8Linear::with_kernel(&w, k, n, Kernel::Amx),
                Int8Linear::with_kernel(&w, k, n, Kernel::Vnni),
            );
            let (mut a, mut b) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
            let mut s = Scratch::default();
            assert!(tiles.matmul(&x, m, &mut a, &mut s));
            assert!(vnni.matmul(&x, m, &mut b, &mut s));
            assert_eq!(a, b, "({m},{k},{n})");
            use std::sync::atomic::Ordering::Relaxed;
            assert_eq!(
                (
                    tiles.tile_blocks.load(Relaxed),
                    vnni.tile_blocks.load(Relaxed)
                ),
                (m.div_ceil(amx::ROWS), 0),
                "({m},{k},{n}): every block of rows on the tiles, none of the VNNI layer's"
            );
        }
    }

    #[test]
    fn zero_rows_and_columns_give_zeros() {
        if Kernel::detect().is_none() {
            eprintln!("no int8 kernel runs on this CPU: not tested");
            return;
        }
        let (m, k, n) = (3, 8, 20);
        let mut w = pseudo_random(k * n, 3);
        for row in w.chunks_exact_mut(n) {
            row[5] = 0.0;
        }
        let mut x = pseudo_random(m * k, 5);
        x[k..2 * k].fill(0.0);
        let lin = Int8Linear::new(&w, k, n).unwrap();
        let mut y = vec![f32::NAN; m * n];
        let mut s = Scratch::default();
        assert!(lin.matmul(&x, m, &mut y, &mut s));
        assert!(y[n..2 * n].iter().all(|&v| v == 0.0));
        assert!((0..m).all(|r| y[r * n + 5] == 0.0));
        assert!(
            !lin.matmul(&x, m + 1, &mut y, &mut s),
            "a shape mismatch is refused"
        );
    }
}
