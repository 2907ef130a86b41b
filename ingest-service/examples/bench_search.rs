//! Search latency of the in-process vector index over 100k chunks (384 dimensions, the
//! MiniLM size): `cargo run --release -p docchat-ingest-service --example bench_search`.
//! Prints p50/p99/max over 2000 queries; run it alone (2 cores: parallel loads spoil it).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)] // a benchmark binary

use std::time::Instant;

use docchat_ingest_service::index::CollectionVectors;

mod support;

use support::{Rng, percentile};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dim = 384;
    let queries = 2000;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut data = Vec::with_capacity(n * dim);
    for _ in 0..n {
        data.extend(rng.unit(dim));
    }
    let docs = 1000;
    let vectors = CollectionVectors {
        version: 1,
        dim,
        chunk_ids: (0..n as i64).collect(),
        doc_of: (0..n).map(|i| (i % docs) as u32).collect(),
        documents: (0..docs).map(|d| format!("doc-{d}")).collect(),
        data,
    };
    let qs: Vec<Vec<f32>> = (0..queries).map(|_| rng.unit(dim)).collect();
    // Warm up.
    for q in qs.iter().take(50) {
        std::hint::black_box(vectors.search(q, 50, None));
    }
    let mut times = Vec::with_capacity(queries);
    for q in &qs {
        let t = Instant::now();
        let hits = vectors.search(q, 50, None);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(hits.len(), 50);
    }
    times.sort_by(f64::total_cmp);
    let filtered: Vec<String> = (0..10).map(|d| format!("doc-{d}")).collect();
    let t = Instant::now();
    for q in qs.iter().take(200) {
        std::hint::black_box(vectors.search(q, 50, Some(&filtered)));
    }
    let filtered_ms = t.elapsed().as_secs_f64() * 1000.0 / 200.0;
    println!("in-process index: {n} chunks x {dim} dims, top-50, {queries} queries");
    println!(
        "p50 {:.2} ms   p99 {:.2} ms   max {:.2} ms   (document filter, 10 docs: mean {:.2} ms)",
        percentile(&times, 0.50),
        percentile(&times, 0.99),
        times[times.len() - 1],
        filtered_ms
    );
}
