//! Integration tests of docchat-parsers: every format on files built here, corrupt
//! inputs, transcripts and the chunker.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod chunking;
mod corrupt;
mod fixtures;
mod formats;
mod transcripts;

use docchat_parsers::{Block, ParsedDocument};

/// Every block of a document as (page number, heading, text).
pub fn blocks(doc: &ParsedDocument) -> Vec<(u32, Option<&str>, &str)> {
    doc.pages
        .iter()
        .flat_map(|p| {
            p.blocks
                .iter()
                .map(move |b: &Block| (p.number, b.heading.as_deref(), b.text.as_str()))
        })
        .collect()
}

/// The texts of the blocks of page `n`.
pub fn page_texts(doc: &ParsedDocument, n: u32) -> Vec<&str> {
    doc.pages
        .iter()
        .filter(|p| p.number == n)
        .flat_map(|p| p.blocks.iter().map(|b| b.text.as_str()))
        .collect()
}
