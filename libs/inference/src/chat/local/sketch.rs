//! A 4-bit sketch of the output embedding, to shortlist the likeliest next tokens.
//!
//! Gemma's output layer is the tied 262 144 × 640 embedding: 189 MB in the file's Q8_0,
//! more than all the decoder layers together, and decoding a token would read all of it.
//! Sampling needs only the best few dozen logits exactly, so decoding scores every token
//! roughly from this sketch (94 MB) and then the best [`SKETCH_CANDIDATES`] exactly from the
//! 8-bit embedding (0.7 MB of rows).
//!
//! The sketch stores each row's deviation from the mean row, column by column in units of
//! that column's standard deviation, in 4-bit blocks of 32 (levels `(q − 7.5)·Δ`, `Δ` a
//! third of the block's RMS: the uniform quantizer's best step for a bell-shaped block).
//! Subtracting the mean row shifts every score by the same `c·x`, which changes no ranking;
//! scaling the columns lets every column keep the same relative precision. A query is
//! scaled by the columns' deviations to match. Measured on real text (the test in
//! `gemma3`), this ranks the exact top tokens well inside the candidates: plain 4-bit
//! blocks of the raw rows, or 1, 2 and 3-bit sketches, lose noticeably more of the
//! sampling distribution.

use rayon::prelude::*;

use super::nibbles::NibbleMatrix;
use super::quant::{Dots, Q8, Q8Matrix, QK, RowSlices};

/// Tokens the sketch passes on to exact scoring.
pub(crate) const SKETCH_CANDIDATES: usize = 1024;

/// The step of the 4-bit levels in units of a block's RMS.
const STEP: f32 = 0.335;

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Sketch {
    m: NibbleMatrix,
    /// Each column's standard deviation over the rows.
    spread: Vec<f32>,
}

impl Sketch {
    /// The sketch of `e`.
    pub(crate) fn from_q8(e: &Q8Matrix) -> Sketch {
        let cols = e.cols;
        // Each column's mean and spread, summed in f64 over slices of rows.
        const ROWS: usize = 4096;
        let sums = (0..e.rows.div_ceil(ROWS))
            .into_par_iter()
            .map(|t| {
                let mut sum = vec![(0f64, 0f64); cols];
                let mut row = vec![0f32; cols];
                for r in t * ROWS..((t + 1) * ROWS).min(e.rows) {
                    e.row_f32(r, &mut row);
                    for (s, &v) in sum.iter_mut().zip(&row) {
                        s.0 += f64::from(v);
                        s.1 += f64::from(v) * f64::from(v);
                    }
                }
                sum
            })
            .reduce(
                || vec![(0f64, 0f64); cols],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(b) {
                        a.0 += b.0;
                        a.1 += b.1;
                    }
                    a
                },
            );
        let n = e.rows.max(1) as f64;
        let center: Vec<f32> = sums.iter().map(|s| (s.0 / n) as f32).collect();
        let spread: Vec<f32> = sums
            .iter()
            .map(|s| {
                let sd = (s.1 / n - (s.0 / n) * (s.0 / n)).max(0.0).sqrt() as f32;
                if sd > 0.0 { sd } else { 1.0 }
            })
            .collect();
        // A slice of rows at a time: its blocks quantized in parallel, then appended in
        // order (so the only extra memory is one slice's blocks).
        let mut m = NibbleMatrix::with_capacity(e.rows, cols, false, Some(7.5));
        for r0 in (0..e.rows).step_by(ROWS) {
            let blocks: Vec<([u8; QK], f32)> = (r0..(r0 + ROWS).min(e.rows))
                .into_par_iter()
                .flat_map_iter(|r| {
                    let mut row = vec![0f32; cols];
                    e.row_f32(r, &mut row);
                    for (v, (c, sd)) in row.iter_mut().zip(center.iter().zip(&spread)) {
                        *v = (*v - c) / sd;
                    }
                    row.chunks_exact(QK).map(quantize_block).collect::<Vec<_>>()
                })
                .collect();
            for (q, step) in &blocks {
                m.push(q, *step, 0.0);
            }
        }
        Sketch { m, spread }
    }

    /// Every row's sketched score with `x` (but for the shared `c·x`) into `out`, rows split
    /// over the current rayon pool.
    pub(crate) fn scores(&self, x: &[f32], out: &mut [f32], dots: Dots) {
        let scaled: Vec<f32> = x.iter().zip(&self.spread).map(|(v, s)| v * s).collect();
        let mut xq = Q8::default();
        xq.quantize_into(&scaled);
        self.m.matvec(&xq, out, dots);
    }
}

/// The 4-bit levels and step of one block of deviations.
fn quantize_block(dev: &[f32]) -> ([u8; QK], f32) {
    let rms = (dev.iter().map(|d| d * d).sum::<f32>() / QK as f32).sqrt();
    let step = STEP * rms;
    let inv = if step > 0.0 { 1.0 / step } else { 0.0 };
    let mut q = [0u8; QK];
    for (q, &d) in q.iter_mut().zip(dev) {
        *q = ((d * inv).floor() + 8.0).clamp(0.0, 15.0) as u8;
    }
    (q, step)
}

/// The indices of the `k` largest of `scores` (in no order).
pub(crate) fn top_k(scores: &[f32], k: usize) -> Vec<u32> {
    let n = scores.len();
    if k >= n {
        return (0..n as u32).collect();
    }
    let by_score = |a: &u32, b: &u32| scores[*b as usize].total_cmp(&scores[*a as usize]);
    // Guess a threshold that about 2k scores pass from an evenly spaced sample, then select
    // among those; fall back to the whole array when the guess keeps too few.
    const SAMPLE: usize = 4096;
    if n >= 4 * SAMPLE && k <= n / 16 {
        let stride = n / SAMPLE;
        let mut sample: Vec<f32> = scores.iter().step_by(stride).copied().collect();
        let rank = ((2 * k).div_ceil(stride)).min(sample.len() - 1);
        sample.select_nth_unstable_by(rank, |a, b| b.total_cmp(a));
        let threshold = sample[rank];
        let mut kept: Vec<u32> = scores
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s >= threshold)
            .map(|(i, _)| i as u32)
            .collect();
        if kept.len() >= k {
            kept.select_nth_unstable_by(k - 1, by_score);
            kept.truncate(k);
            return kept;
        }
    }
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.select_nth_unstable_by(k - 1, by_score);
    idx.truncate(k);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_ranks_like_the_exact_scores() {
        let (rows, cols) = (400, 640);
        // Bell-shaped noise (a sum of four uniforms from xorshift)...
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        // ...in rows with a shared offset, different lengths and columns of different spread.
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let (r, c) = (i / cols, i % cols);
                let noise = uniform() + uniform() + uniform() + uniform();
                0.3 + (1.0 + (r % 7) as f32) * (1.0 + (c % 5) as f32) * noise
            })
            .collect();
        let m = Q8Matrix::from_f32(&w, rows, cols);
        let sketch = Sketch::from_q8(&m);
        let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut approx = vec![0f32; rows];
        sketch.scores(&x, &mut approx, Dots::detect());
        let exact: Vec<f32> = (0..rows)
            .map(|r| (0..cols).map(|c| w[r * cols + c] * x[c]).sum())
            .collect();
        // Up to the shared shift `c·x`, the sketch's scores follow the exact ones: 4-bit
        // levels leave an error of about a tenth of a score's typical size.
        let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
        let (ma, me) = (mean(&approx), mean(&exact));
        let cov: f32 = approx
            .iter()
            .zip(&exact)
            .map(|(a, e)| (a - ma) * (e - me))
            .sum();
        let var = |v: &[f32], m: f32| v.iter().map(|a| (a - m) * (a - m)).sum::<f32>();
        let correlation = cov / (var(&approx, ma) * var(&exact, me)).sqrt();
        assert!(correlation > 0.98, "correlation {correlation}");
        let shortlisted = top_k(&approx, 20);
        for b in top_k(&exact, 5) {
            assert!(shortlisted.contains(&b), "row {b} missed");
        }
    }

    #[test]
    fn top_k_finds_the_largest() {
        let n = 100_000;
        let scores: Vec<f32> = (0..n)
            .map(|i| ((i as u64 * 2_654_435_761) % 1_000_003) as f32)
            .collect();
        for k in [1, 7, 64, 500, 5000] {
            let mut got = top_k(&scores, k);
            got.sort_by(|a, b| scores[*b as usize].total_cmp(&scores[*a as usize]));
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|a, b| scores[*b as usize].total_cmp(&scores[*a as usize]));
            let values = |v: &[u32]| v.iter().map(|&i| scores[i as usize]).collect::<Vec<_>>();
            assert_eq!(values(&got), values(&want[..k]), "k = {k}");
        }
        assert_eq!(top_k(&[1.0, 3.0, 2.0], 5).len(), 3);
    }
}
