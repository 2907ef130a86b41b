//! The in-process all-MiniLM-L6-v2 against the reference implementation.
//!
//! Needs the model files (`scripts/fetch-models.sh`) in `$DOCCHAT_TEST_MODELS_DIR`, else
//! `$DOCCHAT_MODELS_DIR`, else `<repo>/models`; without them each test fails in CI and says
//! loudly that it is skipped elsewhere (`docchat_common::testing::model_file`). `fixtures/minilm_reference.json` holds the vectors sentence-transformers
//! computes for the same texts (`fixtures/make_minilm_reference.py`); `fixtures/real_text.json`
//! holds real paragraphs for comparing the int8 path with the f32 one
//! (`fixtures/make_real_text.py`).

use std::path::PathBuf;
use std::sync::Arc;

use docchat_common::testing::{MINILM_WEIGHTS, model_file, models_dir};
use docchat_inference::{Embedder, Embedders, MINILM_NAME, MiniLmEmbedder, Precision, Registry};
use serde::Deserialize;

/// The model directory, or None (after `unavailable`: a failure in CI) when the model has
/// not been fetched.
fn model_dir() -> Option<PathBuf> {
    model_file(MINILM_WEIGHTS).and_then(|weights| weights.parent().map(PathBuf::from))
}

#[derive(Deserialize)]
struct Reference {
    max_seq_length: usize,
    items: Vec<ReferenceItem>,
}

#[derive(Deserialize)]
struct ReferenceItem {
    text: String,
    tokens_untruncated: usize,
    embedding: Vec<f32>,
}

fn reference() -> Reference {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/minilm_reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

/// What `Precision::Auto` should pick on this CPU.
fn fast_arithmetic() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
            return "int8";
        }
        if has!("avx2") && has!("fma") {
            return "int8-avx2";
        }
    }
    "f32"
}

/// `used` is the arithmetic `expected`; "int8" covers both AVX-512 kernels, "int8-amx" being
/// where the CPU has AMX tiles (the VNNI kernel's exact sums: the unit tests of
/// `embed::int8`).
fn assert_arithmetic(used: &str, expected: &str) {
    assert!(
        used == expected || (expected == "int8" && used == "int8-amx"),
        "{used} where {expected} was expected"
    );
}

#[tokio::test]
async fn matches_sentence_transformers_reference() {
    let Some(dir) = model_dir() else {
        return;
    };
    // The f32 path (forced, so it is tested on every CPU) within float rounding of the
    // reference; the default path (int8 where the CPU has VNNI) within cosine 0.99.
    for (precision, arithmetic, floor) in [
        (Precision::F32, "f32", 0.999),
        (Precision::Auto, fast_arithmetic(), 0.99),
    ] {
        check_reference(&dir, precision, arithmetic, floor).await;
    }
}

async fn check_reference(
    dir: &std::path::Path,
    precision: Precision,
    arithmetic: &str,
    floor: f32,
) {
    let reference = reference();
    let embedder = MiniLmEmbedder::load_with_precision(dir, Some(2), precision).unwrap();
    assert_arithmetic(embedder.linear_arithmetic(), arithmetic);
    assert_eq!(embedder.name(), "all-MiniLM-L6-v2");
    assert_eq!(embedder.dimension(), 384);
    assert_eq!(embedder.max_tokens(), reference.max_seq_length);
    assert_eq!(embedder.max_tokens(), 256);
    assert_eq!(embedder.max_input_tokens(), 254);

    let texts: Vec<String> = reference.items.iter().map(|i| i.text.clone()).collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (item, v) in reference.items.iter().zip(&vectors) {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm} for {:?}", item.text);
        let c = cosine(v, &item.embedding);
        assert!(
            c >= floor,
            "{arithmetic}: cosine {c} with the reference for {:?}",
            item.text
        );
        // The token counts the chunker sees are the reference tokenizer's, less [CLS]/[SEP].
        assert_eq!(
            embedder.count_tokens(&item.text),
            item.tokens_untruncated - 2,
            "{:?}",
            item.text
        );
    }
    // The long text is past the limit, so truncation was exercised.
    assert!(reference.items.iter().any(|i| i.tokens_untruncated > 256));

    // Each text alone gives the same vector as in the batch (packing without padding).
    for (text, batched) in texts.iter().zip(&vectors).take(3) {
        let alone = embedder.embed(std::slice::from_ref(text)).await.unwrap();
        assert!(cosine(&alone[0], batched) > 0.99999);
    }
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
}

#[derive(Deserialize)]
struct RealText {
    texts: Vec<String>,
    tokens: Vec<usize>,
}

/// The fast path against the f32 one on real paragraphs of 6 to 255 tokens (headings,
/// prose, lists, tables, code, and runs of paragraphs filling the window as chunks do):
/// every embedding within cosine 0.99, and the ranking of texts by similarity kept.
#[tokio::test]
async fn fast_path_matches_f32_on_real_text() {
    let Some(dir) = model_dir() else {
        return;
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/real_text.json");
    let real: RealText = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(real.texts.len() >= 40);
    assert!(real.tokens.iter().filter(|&&t| t > 200).count() >= 10);
    assert!(real.tokens.iter().all(|&t| t <= 256));

    let exact = MiniLmEmbedder::load_with_precision(&dir, Some(2), Precision::F32).unwrap();
    let fast = MiniLmEmbedder::load(&dir, Some(2)).unwrap();
    assert_eq!(exact.linear_arithmetic(), "f32");
    assert_arithmetic(fast.linear_arithmetic(), fast_arithmetic());
    let want = exact.embed(&real.texts).await.unwrap();
    let got = fast.embed(&real.texts).await.unwrap();
    let cosines: Vec<f32> = want.iter().zip(&got).map(|(a, b)| cosine(a, b)).collect();
    let (worst, at) = cosines
        .iter()
        .zip(0..)
        .fold((1f32, 0), |m, (&c, i)| if c < m.0 { (c, i) } else { m });
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    eprintln!(
        "{} vs f32 on {} texts: mean cosine {mean:.5}, worst {worst:.5} ({} tokens)",
        fast_arithmetic(),
        cosines.len(),
        real.tokens[at]
    );
    for ((c, text), tokens) in cosines.iter().zip(&real.texts).zip(&real.tokens) {
        assert!(
            *c >= 0.99,
            "cosine {c} for a text of {tokens} tokens: {text:?}"
        );
    }
    // Retrieval compares texts with each other: each text's nearest other text is the
    // same in both paths, or one the f32 path puts within 0.01 of its nearest.
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let nearest = |all: &[Vec<f32>], v: &[f32]| {
            (0..all.len())
                .filter(|&j| j != i)
                .map(|j| (cosine(v, &all[j]), j))
                .fold((f32::MIN, 0), |m, x| if x.0 > m.0 { x } else { m })
        };
        let (best, j_exact) = nearest(&want, w);
        let (_, j_fast) = nearest(&got, g);
        assert!(
            j_fast == j_exact || cosine(w, &want[j_fast]) >= best - 0.01,
            "text {i}: nearest {j_fast} instead of {j_exact}"
        );
    }
}

#[tokio::test]
async fn similar_sentences_are_closer_than_unrelated_ones() {
    let Some(dir) = model_dir() else {
        return;
    };
    let embedder = MiniLmEmbedder::load(&dir, Some(1)).unwrap();
    let texts = [
        "The cat sits on the mat.",
        "A cat is sitting on a rug.",
        "Quarterly revenue grew by twelve percent compared to last year.",
        "How do I reset my password?",
        "Steps to recover a forgotten account password",
    ]
    .map(String::from);
    let v = embedder.embed(&texts).await.unwrap();
    let cats = cosine(&v[0], &v[1]);
    let passwords = cosine(&v[3], &v[4]);
    for (similar, a) in [(cats, 0), (passwords, 3)] {
        for unrelated in [2, if a == 0 { 3 } else { 0 }] {
            let other = cosine(&v[a], &v[unrelated]);
            assert!(
                similar > other + 0.3,
                "similar {similar} vs unrelated {other}"
            );
        }
    }
    assert!(
        cats > 0.6 && passwords > 0.6,
        "cats {cats}, passwords {passwords}"
    );
}

#[tokio::test]
async fn many_texts_of_mixed_lengths_come_back_in_order() {
    let Some(dir) = model_dir() else {
        return;
    };
    let embedder = Arc::new(
        MiniLmEmbedder::load(&dir, Some(2))
            .unwrap()
            .with_batch_size(4),
    );
    // Lengths from 4 to about 100 tokens, in no order: batches of 4 mix and sort them.
    let texts: Vec<String> = (0..11)
        .map(|i| {
            let words = "words that repeat ".repeat((i * 7) % 11 * 3);
            format!("document {i}: {words}")
        })
        .collect();
    let all = embedder.embed(&texts).await.unwrap();
    // Two callers at once are served one after the other, each getting its own results.
    let (a, b) = tokio::join!(embedder.embed(&texts[..5]), embedder.embed(&texts[8..]));
    for (v, i) in a.unwrap().iter().zip(0..).chain(b.unwrap().iter().zip(8..)) {
        assert!(cosine(v, &all[i]) > 0.99999, "text {i}");
    }
    for (i, v) in all.iter().enumerate() {
        let alone = embedder
            .embed(std::slice::from_ref(&texts[i]))
            .await
            .unwrap();
        assert!(cosine(v, &alone[0]) > 0.99999, "text {i}");
    }
}

#[tokio::test]
async fn embedders_registry_prefers_the_local_model() {
    let Some(_) = model_dir() else {
        return;
    };
    let registry = Registry::parse(
        "[[models]]\nname = \"upstream-embed\"\nkind = \"embedding\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let embedders = Embedders::load(&registry, &models_dir(), Some(1)).unwrap();
    assert_eq!(embedders.names(), vec![MINILM_NAME, "upstream-embed"]);
    assert_eq!(embedders.default_name(), Some(MINILM_NAME));
    let local = embedders.get(MINILM_NAME).unwrap();
    assert_eq!(local.dimension(), 384);
    assert_eq!(local.count_tokens("hello world"), 2);
}
