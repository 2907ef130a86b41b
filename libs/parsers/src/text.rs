//! Text decoding and plain-text files.

use crate::util::{DocBuilder, paragraphs};
use crate::{DocumentKind, ParseError, ParsedDocument};

/// Decodes a text file: UTF-8 (with or without BOM), UTF-16 with a BOM, or — when the
/// bytes are not UTF-8 but read as legacy 8-bit text — Windows-1252. Bytes that look
/// binary (NULs or many control characters) are `Corrupt`.
pub(crate) fn decode(bytes: &[u8], format: &str) -> Result<String, ParseError> {
    if let Some((encoding, bom_len)) = encoding_rs::Encoding::for_bom(bytes) {
        let body = bytes.get(bom_len..).unwrap_or_default();
        let (text, had_errors) = encoding.decode_without_bom_handling(body);
        if had_errors && encoding == encoding_rs::UTF_8 {
            return Err(not_text(format));
        }
        return Ok(text.into_owned());
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            if looks_binary(bytes) {
                return Err(not_text(format));
            }
            Ok(text.to_owned())
        }
        Err(_) => {
            if looks_binary(bytes) {
                return Err(not_text(format));
            }
            let (text, _, _) = encoding_rs::WINDOWS_1252.decode(bytes);
            Ok(text.into_owned())
        }
    }
}

fn not_text(format: &str) -> ParseError {
    ParseError::corrupt(
        format,
        "not valid UTF-8 text (the file looks binary; save it as UTF-8 text)",
    )
}

/// Whether the bytes hold a NUL or more than 1 in 50 control characters other than
/// tab, newline, carriage return, form feed and escape.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(64 * 1024)];
    if sample.contains(&0) {
        return true;
    }
    let controls = sample
        .iter()
        .filter(|b| **b < 0x20 && !matches!(**b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
        .count();
    controls * 50 > sample.len()
}

/// A plain-text file: form feeds separate pages, blank lines separate blocks.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let text = decode(bytes, "text file")?;
    let mut doc = DocBuilder::new(DocumentKind::Text);
    let text = text.trim_end_matches(|c: char| c == '\x0c' || c.is_whitespace());
    let pages: Vec<&str> = text.split('\x0c').collect();
    let paged = pages.len() > 1;
    for page in pages {
        for para in paragraphs(page) {
            doc.push_block(para);
            if doc.full() {
                break;
            }
        }
        if paged {
            doc.end_page();
        }
    }
    doc.finish(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_utf16_and_latin1() {
        let utf16: Vec<u8> = [0xff, 0xfe]
            .into_iter()
            .chain("héllo".encode_utf16().flat_map(|u| u.to_le_bytes()))
            .collect();
        assert_eq!(decode(&utf16, "text").ok().as_deref(), Some("héllo"));
        assert_eq!(
            decode(b"caf\xe9 cr\xe8me", "text").ok().as_deref(),
            Some("café crème")
        );
        assert!(decode(b"\x00\x01\x02garbage\xff", "text").is_err());
    }

    #[test]
    fn form_feeds_make_pages() {
        let doc = parse(b"one\n\ntwo\x0cthree").ok();
        let doc = doc.as_ref();
        assert_eq!(doc.map(|d| d.page_count), Some(2));
        assert_eq!(
            doc.map(|d| d.pages[1].blocks[0].text.as_str()),
            Some("three")
        );
    }
}
