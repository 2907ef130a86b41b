//! Which pages of real PDFs the scanned-page rule (`pdf::looks_scanned`) sends to text
//! recognition: per file, its pages, the pages flagged, and how many visible characters the
//! text layers of the pages not flagged hold (min, median) and how many of them hold fewer
//! than the rule's 200 per Letter page. docs/ingestion.md "Scanned pages" reports a run.
//!
//! `cargo run --release -p docchat-parsers --example scanned_pages -- FILE.pdf...`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let mut all_text = Vec::new();
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).expect("readable file");
        let name = std::path::Path::new(&path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let parsed = match docchat_parsers::parse(&name, &bytes) {
            Ok(p) => p,
            Err(e) => {
                println!("{name}: not parsed ({e})");
                continue;
            }
        };
        let mut text: Vec<usize> = parsed
            .pages
            .iter()
            .filter(|p| !parsed.scanned.contains(&p.number))
            .map(|p| p.text().chars().filter(|c| !c.is_whitespace()).count())
            .collect();
        text.sort_unstable();
        let thin = text.iter().filter(|c| **c < 200).count();
        println!(
            "{name}: {} pages, {} flagged as scanned {:?}; text-layer pages: min {} median {} chars, {thin} under 200",
            parsed.pages.len(),
            parsed.scanned.len(),
            if parsed.scanned.len() > 12 {
                &parsed.scanned[..12]
            } else {
                &parsed.scanned[..]
            },
            text.first().copied().unwrap_or(0),
            text.get(text.len() / 2).copied().unwrap_or(0),
        );
        all_text.extend(text);
    }
    all_text.sort_unstable();
    println!(
        "all text-layer pages: {} (median {} chars; {} under 200)",
        all_text.len(),
        all_text.get(all_text.len() / 2).copied().unwrap_or(0),
        all_text.iter().filter(|c| **c < 200).count()
    );
}
