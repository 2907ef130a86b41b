//! Throughput of the in-process MiniLM embedder, for `bench/embeddings/run.sh` (which runs
//! sentence-transformers on the same texts and compares).
//!
//! ```sh
//! cargo bench -p docchat-inference --bench embeddings -- \
//!     --model-dir models/all-MiniLM-L6-v2 --texts texts.json --out rust.json \
//!     [--threads 2] [--batch 32] [--rounds 3] [--precision auto|f32]
//! ```
//!
//! `texts.json` is `{"cells": [{"name": "64 tokens", "texts": [...]}, ...]}`. Each cell is
//! embedded in calls of `--batch` texts, as sentence-transformers' `encode(batch_size=…)`
//! does, after one warm-up call; the output holds sentences per second of every round and
//! the embeddings of the last round. `--precision f32` forces the f32 linear layers (the
//! default, `auto`, takes the int8 kernels where the CPU has AVX-512 VNNI).

// A command-line tool: it reports progress on stderr.
#![allow(clippy::print_stderr)]

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use docchat_inference::{Embedder, MiniLmEmbedder, Precision};
use serde_json::{Value, json};

struct Args {
    model_dir: PathBuf,
    texts: PathBuf,
    out: PathBuf,
    threads: Option<usize>,
    batch: usize,
    rounds: usize,
    precision: Precision,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut model_dir = None;
    let mut texts = None;
    let mut out = None;
    let mut threads = None;
    let mut batch = 32;
    let mut rounds = 3;
    let mut precision = Precision::Auto;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--model-dir" => model_dir = Some(PathBuf::from(value()?)),
            "--texts" => texts = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--threads" => threads = Some(value()?.parse()?),
            "--batch" => batch = value()?.parse()?,
            "--rounds" => rounds = value()?.parse()?,
            "--precision" => {
                precision = match value()?.as_str() {
                    "auto" => Precision::Auto,
                    "f32" => Precision::F32,
                    other => return Err(format!("unknown precision {other}").into()),
                }
            }
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(Args {
        model_dir: model_dir.ok_or("--model-dir is required")?,
        texts: texts.ok_or("--texts is required")?,
        out: out.ok_or("--out is required")?,
        threads,
        batch: batch.max(1),
        rounds: rounds.max(1),
        precision,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let input: Value = serde_json::from_slice(&std::fs::read(&args.texts)?)?;
    let cells = input["cells"].as_array().ok_or("texts file has no cells")?;
    let embedder =
        MiniLmEmbedder::load_with_precision(&args.model_dir, args.threads, args.precision)?;
    eprintln!("linear layers: {}", embedder.linear_arithmetic());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut results = Vec::new();
    for cell in cells {
        let name = cell["name"].as_str().unwrap_or("?").to_owned();
        let texts: Vec<String> = cell["texts"]
            .as_array()
            .ok_or("a cell has no texts")?
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        if texts.is_empty() {
            return Err(format!("cell {name} has no texts").into());
        }
        rt.block_on(embedder.embed(&texts[..args.batch.min(texts.len())]))?;
        let mut sps = Vec::new();
        let mut vectors = Vec::new();
        for _ in 0..args.rounds {
            vectors.clear();
            let start = Instant::now();
            for chunk in texts.chunks(args.batch) {
                vectors.extend(rt.block_on(embedder.embed(chunk))?);
            }
            let secs = start.elapsed().as_secs_f64();
            sps.push(texts.len() as f64 / secs);
        }
        eprintln!(
            "rust {name}: {} sentences/s per round",
            sps.iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        results.push(json!({"name": name, "sentences_per_second": sps, "embeddings": vectors}));
    }
    let out = json!({
        "implementation": "docchat-inference MiniLmEmbedder",
        "threads": embedder.threads(),
        "batch": args.batch,
        "linear": embedder.linear_arithmetic(),
        "cells": results,
    });
    std::fs::write(&args.out, serde_json::to_vec(&out)?)?;
    Ok(())
}
