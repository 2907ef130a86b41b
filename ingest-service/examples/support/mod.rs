//! What the search benchmarks share: deterministic vectors and percentiles.
// Each benchmark uses part of this.
#![allow(dead_code)]

/// xorshift: deterministic vectors without a dependency.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [-0.5, 0.5).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    pub fn raw(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.next()).collect()
    }

    /// A random direction.
    pub fn unit(&mut self, dim: usize) -> Vec<f32> {
        unit(self.raw(dim))
    }
}

pub fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

/// The `p` quantile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
