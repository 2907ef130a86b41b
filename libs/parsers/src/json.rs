//! JSON and JSON Lines, rendered as pretty-printed text: one block per top-level array
//! element or object member (per line for JSON Lines), so chunks break between records.

use serde_json::Value;

use crate::text::decode;
use crate::util::DocBuilder;
use crate::{DocumentKind, ParseError, ParsedDocument};

const FORMAT: &str = "JSON file";

/// Parses a JSON document, or JSON Lines when `lines` is set or the text holds several
/// values one per line.
pub(crate) fn parse(bytes: &[u8], lines: bool) -> Result<ParsedDocument, ParseError> {
    let text = decode(bytes, FORMAT)?;
    let mut doc = DocBuilder::new(DocumentKind::Json);
    if !lines {
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => {
                render_top(&value, &mut doc)?;
                return doc.finish(None);
            }
            // several values one per line is JSON Lines under a .json name
            Err(e) if e.is_data() || e.line() <= 1 || !looks_like_json_lines(&text) => {
                return Err(ParseError::corrupt(FORMAT, e));
            }
            Err(_) => {}
        }
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| ParseError::corrupt(FORMAT, format!("line {}: {e}", i + 1)))?;
        doc.push_block(pretty(&value)?);
        if doc.full() {
            break;
        }
    }
    doc.finish(None)
}

fn looks_like_json_lines(text: &str) -> bool {
    let mut values = text.lines().filter(|l| !l.trim().is_empty());
    values
        .next()
        .is_some_and(|first| serde_json::from_str::<Value>(first).is_ok())
}

fn render_top(value: &Value, doc: &mut DocBuilder) -> Result<(), ParseError> {
    match value {
        Value::Array(items) => {
            for item in items {
                doc.push_block(pretty(item)?);
                if doc.full() {
                    break;
                }
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let key = serde_json::to_string(key).map_err(|e| ParseError::corrupt(FORMAT, e))?;
                doc.push_block(format!("{key}: {}", pretty(item)?));
                if doc.full() {
                    break;
                }
            }
        }
        other => doc.push_block(pretty(other)?),
    }
    Ok(())
}

fn pretty(value: &Value) -> Result<String, ParseError> {
    serde_json::to_string_pretty(value).map_err(|e| ParseError::corrupt(FORMAT, e))
}
