//! Times parsing and chunking a generated 200-page text PDF and prints pages per second.
//!
//! `cargo run --release -p docchat-parsers --example pdf_throughput [pages]`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use docchat_parsers::{ChunkOptions, chunk, parse};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

const WORDS: &[&str] = &[
    "the",
    "model",
    "retrieval",
    "document",
    "answers",
    "questions",
    "with",
    "citations",
    "from",
    "pages",
    "of",
    "collections",
    "and",
    "uploads",
    "embedding",
    "vectors",
    "are",
    "stored",
    "per",
    "chunk",
    "while",
    "headings",
    "keep",
    "context",
    "for",
    "readers",
];

/// A text PDF of `pages` pages, 46 lines of about 12 words each, in paragraphs of six
/// lines, set in a font with widths and a ToUnicode-free WinAnsi encoding.
fn generate(pages: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let widths: Vec<Object> = (32..127)
        .map(|c| if c == 32 { 278 } else { 556 }.into())
        .collect();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "TrueType",
        "BaseFont" => "Arial",
        "Encoding" => "WinAnsiEncoding",
        "FirstChar" => 32,
        "LastChar" => 126,
        "Widths" => widths,
    });
    let mut seed = 7u32;
    let mut kids = Vec::new();
    for p in 0..pages {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 16.into()]),
            Operation::new("Td", vec![72.into(), 760.into()]),
            Operation::new(
                "Tj",
                vec![Object::string_literal(format!("Section {}", p + 1))],
            ),
            Operation::new("Tf", vec!["F1".into(), 10.into()]),
            Operation::new("TL", vec![12.into()]),
            Operation::new("Td", vec![0.into(), (-24).into()]),
        ];
        for line in 0..46 {
            let mut text = String::new();
            for _ in 0..12 {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                text.push_str(WORDS[(seed >> 16) as usize % WORDS.len()]);
                text.push(' ');
            }
            if line % 6 == 5 {
                text.truncate(text.len() - 1);
                text.push('.');
            }
            ops.push(Operation::new("Tj", vec![Object::string_literal(text)]));
            ops.push(Operation::new("T*", vec![]));
            if line % 6 == 5 {
                ops.push(Operation::new("Td", vec![0.into(), (-8).into()]));
            }
        }
        ops.push(Operation::new("ET", vec![]));
        let mut stream = Stream::new(
            dictionary! {},
            Content { operations: ops }.encode().unwrap(),
        );
        stream.compress().unwrap();
        let content_id = doc.add_object(stream);
        kids.push(Object::from(doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => content_id,
        })));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => count,
            "Resources" => dictionary! { "Font" => dictionary! { "F1" => font_id } },
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

fn main() {
    let pages: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let bytes = generate(pages);
    let words = |s: &str| s.split_whitespace().count();
    let options = ChunkOptions::default();
    // one warm-up run, then the best of five
    let mut best = f64::MAX;
    let mut best_chunk = f64::MAX;
    let mut chunks = Vec::new();
    for _ in 0..6 {
        let start = Instant::now();
        let doc = parse("bench.pdf", &bytes).expect("the generated PDF parses");
        let parsed = start.elapsed().as_secs_f64();
        let start = Instant::now();
        chunks = chunk(&doc, &options, &words);
        let chunked = start.elapsed().as_secs_f64();
        assert_eq!(doc.page_count as usize, pages);
        best = best.min(parsed);
        best_chunk = best_chunk.min(chunked);
    }
    println!(
        "{pages} pages ({} KiB): parse {:.1} ms ({:.0} pages/s), chunk {:.1} ms into {} chunks, total {:.0} pages/s",
        bytes.len() / 1024,
        best * 1000.0,
        pages as f64 / best,
        best_chunk * 1000.0,
        chunks.len(),
        pages as f64 / (best + best_chunk),
    );
}
