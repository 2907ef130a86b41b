//! Speed and memory of the in-process GGUF chat model.
//!
//! ```sh
//! cargo run --release -p docchat-inference --example bench_local_llm -- \
//!     [--model models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf] \
//!     [--threads 1,2] [--rounds 3] [--prompt-tokens 512] [--decode-tokens 128]
//! ```
//!
//! For each thread count: prefill speed of a 512-token prompt (`--prompt-tokens`), time to
//! the first token of that prompt (tokenizing its text included), decode speed over 128
//! tokens (`--decode-tokens`) after a short prompt and after the long one, each the best of
//! `--rounds`; then the peak resident memory of the process (`VmHWM`; one model is loaded at
//! a time). The model path defaults to the built-in chat model, `$DOCCHAT_MODELS_DIR` (else
//! `./models`) `/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf`; Qwen2.5-Coder-0.5B
//! Instruct (`scripts/fetch-models.sh --with-llm=qwen`) is `--model
//! models/qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`.

// A command-line tool: it prints its results.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use docchat_inference::local::GenParams;
use docchat_inference::{LocalModel, LocalOptions};

const PROMPT_TOKENS: usize = 512;
const DECODE_TOKENS: usize = 128;

const TEXT: &str = "Large language models read a prompt, turn every token into a vector, \
and pass the vectors through a stack of attention and feed-forward layers. Attention lets \
each token look at the tokens before it; the feed-forward layers transform each token on its \
own. At the end, the last vector is compared with every word of the vocabulary, and the most \
likely next token is chosen. Running such a model on a small computer is a matter of memory \
bandwidth as much as of arithmetic: every weight must be read once for every generated token. ";

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

struct Row {
    threads: usize,
    load_s: f64,
    prefill_tps: f64,
    ttft_s: f64,
    decode_short_tps: f64,
    decode_long_tps: f64,
}

#[expect(clippy::disallowed_methods, reason = "a benchmark's settings")]
fn main() -> Result<(), Box<dyn Error>> {
    let mut model = std::env::var_os("DOCCHAT_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("models"))
        .join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    let mut threads = vec![1usize, 2];
    let mut rounds = 3usize;
    let mut prompt_tokens = PROMPT_TOKENS;
    let mut decode_tokens = DECODE_TOKENS;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--model" => model = PathBuf::from(value()?),
            "--threads" => {
                threads = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--rounds" => rounds = value()?.parse()?,
            "--prompt-tokens" => prompt_tokens = value()?.parse()?,
            "--decode-tokens" => decode_tokens = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let rounds = rounds.max(1);
    let mut rows = Vec::new();
    let mut peak_first = f64::NAN;
    for &t in &threads {
        let started = Instant::now();
        let m = LocalModel::load(
            &model,
            &LocalOptions {
                threads: t,
                context: 8192,
                seed: Some(1),
            },
        )?;
        let load_s = started.elapsed().as_secs_f64();
        let tok = m.tokenizer();
        // A prompt of `prompt_tokens` (512): the start (<bos> where the model has one) and
        // the text repeated, cut to length; and its text.
        let start = tok.start();
        let mut long = start.clone();
        while long.len() < prompt_tokens {
            long.extend(tok.encode(TEXT));
        }
        long.truncate(prompt_tokens);
        let long_text = tok.decode(&long[start.len()..]);
        let mut short = start.clone();
        short.extend(tok.encode("Once upon a time"));

        let mut decode = GenParams::greedy(decode_tokens.max(2));
        decode.stop_at_control = false;
        let mut best = Row {
            threads: t,
            load_s,
            prefill_tps: 0.0,
            ttft_s: f64::INFINITY,
            decode_short_tps: 0.0,
            decode_long_tps: 0.0,
        };
        for round in 0..=rounds {
            // Round 0 warms up (page faults, pool start).
            let s = m.generate(&long, &GenParams::greedy(1), &|| false, &mut |_| true)?;
            let prefill_tps = s.prompt_tokens as f64 / s.prefill.as_secs_f64();

            let t0 = Instant::now();
            let mut ttft = None;
            let mut ids = start.clone();
            ids.extend(tok.encode(&long_text));
            m.generate(&ids, &GenParams::greedy(1), &|| false, &mut |_| {
                ttft.get_or_insert(t0.elapsed());
                true
            })?;
            let ttft = ttft.map_or(f64::NAN, |d| d.as_secs_f64());

            let s = m.generate(&short, &decode, &|| false, &mut |_| true)?;
            let short_tps = (s.completion_tokens - 1) as f64 / s.decode.as_secs_f64();
            let s = m.generate(&long, &decode, &|| false, &mut |_| true)?;
            let long_tps = (s.completion_tokens - 1) as f64 / s.decode.as_secs_f64();
            eprintln!(
                "threads {t} round {round}: prefill {prefill_tps:.0} tok/s, ttft {:.0} ms, decode {short_tps:.1} / {long_tps:.1} tok/s",
                ttft * 1e3
            );
            if round > 0 {
                best.prefill_tps = best.prefill_tps.max(prefill_tps);
                best.ttft_s = best.ttft_s.min(ttft);
                best.decode_short_tps = best.decode_short_tps.max(short_tps);
                best.decode_long_tps = best.decode_long_tps.max(long_tps);
            }
        }
        if peak_first.is_nan() {
            peak_first = peak_rss_mb();
        }
        rows.push(best);
        drop(m);
    }

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    println!("model: {}", model.display());
    println!(
        "cpu: {cpu}, {} available; best of {rounds} rounds",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!(
        "| threads | load s | prefill {prompt_tokens} tok/s | TTFT {prompt_tokens} ms | decode {decode_tokens} tok/s (short ctx) | decode {decode_tokens} tok/s (after {prompt_tokens}) |"
    );
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.2} | {:.0} | {:.0} | {:.1} | {:.1} |",
            r.threads,
            r.load_s,
            r.prefill_tps,
            r.ttft_s * 1e3,
            r.decode_short_tps,
            r.decode_long_tps
        );
    }
    println!();
    println!(
        "peak RSS (VmHWM) with one model loaded: {peak_first:.0} MB; whole run: {:.0} MB",
        peak_rss_mb()
    );
    Ok(())
}
