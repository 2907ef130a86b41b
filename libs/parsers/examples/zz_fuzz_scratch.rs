#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]
#[path = "../tests/it/fixtures.rs"]
mod fixtures;
use docchat_parsers::*;
fn main() {
    let samples: Vec<(DocumentKind, &str, Vec<u8>)> = vec![
        (
            DocumentKind::Pdf,
            "a.pdf",
            fixtures::pdf(Some("t"), &["# H\nsome text\n\nmore"]),
        ),
        (DocumentKind::Pdf, "b.pdf", fixtures::layout_pdf()),
        (DocumentKind::Docx, "a.docx", fixtures::docx()),
        (DocumentKind::Pptx, "a.pptx", fixtures::pptx()),
        (DocumentKind::Xlsx, "a.xlsx", fixtures::xlsx()),
    ];
    let iters: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().unwrap())
        .unwrap_or(2000);
    let mut state = 0x2545_f491_u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut panics = 0;
    for (kind, name, bytes) in &samples {
        let len = bytes.len();
        for _ in 0..iters {
            let mut flipped = bytes.clone();
            for _ in 0..1 + next() % 16 {
                let at = next() as usize % len;
                flipped[at] = next() as u8;
            }
            let r = std::panic::catch_unwind(|| {
                let _ = parse_as(*kind, name, &flipped);
            });
            if r.is_err() {
                panics += 1;
                std::fs::write(
                    format!("/tmp/panic_{panics}.{}", name.split('.').nth(1).unwrap()),
                    &flipped,
                )
                .unwrap();
            }
        }
    }
    println!("panics: {panics}");
}
