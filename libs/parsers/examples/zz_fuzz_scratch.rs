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
    // mutate the parts inside the zips
    for (kind, name, bytes) in &samples[2..] {
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes.clone())).unwrap();
        let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..archive.len() {
            let mut f = archive.by_index(i).unwrap();
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut buf).unwrap();
            parts.push((f.name().unwrap().to_string(), buf));
        }
        for _ in 0..iters {
            let mut parts = parts.clone();
            let n = parts.len();
            let part = &mut parts[next() as usize % n].1;
            for _ in 0..1 + next() % 8 {
                if part.is_empty() { break; }
                let at = next() as usize % part.len();
                match next() % 3 { 0 => part[at] = next() as u8, 1 => { part.truncate(at); }, _ => { let c = b"<>/\"&;:=0123456789 rsIdp"[next() as usize % 25]; part.insert(at, c); } }
            }
            let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            for (name, data) in &parts { w.start_file(name.as_str(), zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)).unwrap(); std::io::Write::write_all(&mut w, data).unwrap(); }
            let z = w.finish().unwrap().into_inner();
            let r = std::panic::catch_unwind(|| { let _ = parse_as(*kind, name, &z); });
            if r.is_err() { panics += 1; std::fs::write(format!("/tmp/panic_{panics}.{}", name.split('.').nth(1).unwrap()), &z).unwrap(); }
        }
    }
    println!("panics: {panics}");
}
