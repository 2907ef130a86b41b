//! Pure-Rust document parsers and the token-aware chunker of docchat's ingestion.
//!
//! [`parse`] turns an uploaded file into a [`ParsedDocument`]: pages of [`Block`]s, each
//! with the heading path in force, plus timed [`AudioSegment`]s for transcripts.
//! [`chunk`] cuts a parsed document into overlapping, token-bounded [`Chunk`]s that
//! remember their pages, heading and (for transcripts) times.
//!
//! Formats: plain text, Markdown, HTML, PDF (text layer), Word `.docx`, PowerPoint
//! `.pptx` (a page per slide), Excel `.xlsx` (a page per sheet), CSV/TSV, JSON and JSON
//! Lines, and WebVTT/SRT transcripts. Audio and video ([`is_media`]) are transcribed
//! elsewhere and come back through [`segments_to_document`]; images ([`is_image`]) and the
//! scanned pages of a PDF ([`ParsedDocument::scanned`]) are read by text recognition
//! elsewhere and come back through [`ParsedDocument::recognized`] and [`Page::recognized`].
//!
//! Bad input never panics: it is a [`ParseError`] whose message tells the user what to do.

mod chunk;
mod detect;
mod docx;
mod error;
mod html;
mod json;
mod markdown;
mod model;
mod ooxml;
mod pdf;
mod pptx;
mod sheet;
mod text;
mod transcript;
mod util;

pub use chunk::{Chunk, ChunkOptions, chunk};
pub use detect::{detect, extension, is_image, is_media, kind_by_extension};
pub use error::ParseError;
pub use model::{AudioSegment, Block, DocumentKind, Page, ParsedDocument};
pub use transcript::{display_name, segments_to_document};

/// The largest file [`parse`] accepts.
pub const MAX_FILE_BYTES: usize = 512 * 1024 * 1024;

/// Parses a file: detects its kind with [`detect`] and extracts its text.
///
/// # Errors
///
/// `Unsupported` for types docchat cannot read (media included), `Corrupt` for damaged
/// files, `Encrypted` for password-protected ones, `Empty` when there is no text,
/// `TooLarge` past the size limits.
pub fn parse(filename: &str, bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    if bytes.is_empty() {
        // the type still matters: an empty .exe is unsupported, not empty
        detect(filename, b" ")?;
        return Err(ParseError::Empty);
    }
    let kind = detect(filename, bytes)?;
    parse_as(kind, filename, bytes)
}

/// Parses a file as `kind`, skipping detection (the file name only tells CSV from TSV
/// and JSON from JSON Lines).
///
/// # Errors
///
/// As [`parse`], less `Unsupported`.
pub fn parse_as(
    kind: DocumentKind,
    filename: &str,
    bytes: &[u8],
) -> Result<ParsedDocument, ParseError> {
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    if bytes.len() > MAX_FILE_BYTES {
        return Err(ParseError::TooLarge(format!(
            "the file is over {} MiB",
            MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    // the parsers return errors for bad input; this only guards against a bug in one of
    // them (or in a library they use) taking down the ingestion worker
    std::panic::catch_unwind(|| parse_kind(kind, filename, bytes)).unwrap_or_else(|_| {
        Err(ParseError::corrupt(
            kind.label(),
            "the file could not be read",
        ))
    })
}

fn parse_kind(
    kind: DocumentKind,
    filename: &str,
    bytes: &[u8],
) -> Result<ParsedDocument, ParseError> {
    let lower = filename.to_ascii_lowercase();
    match kind {
        DocumentKind::Text => text::parse(bytes),
        DocumentKind::Markdown => markdown::parse(bytes),
        DocumentKind::Html => html::parse(bytes),
        DocumentKind::Pdf => pdf::parse(bytes),
        DocumentKind::Docx => docx::parse(bytes),
        DocumentKind::Pptx => pptx::parse(bytes),
        DocumentKind::Xlsx => sheet::parse_xlsx(bytes),
        DocumentKind::Csv => {
            sheet::parse_csv(bytes, lower.ends_with(".tsv") || lower.ends_with(".tab"))
        }
        DocumentKind::Json => json::parse(
            bytes,
            lower.ends_with(".jsonl") || lower.ends_with(".ndjson"),
        ),
        DocumentKind::Transcript => transcript::parse(bytes),
        DocumentKind::Image => Err(ParseError::Unsupported(
            "an image (its text is read by text recognition, not by a parser)".to_owned(),
        )),
    }
}
