//! Spreadsheets: Excel workbooks (one page per sheet) and CSV/TSV files. Each row becomes
//! a block of `header: value` lines, the first non-empty row giving the headers.

use std::io::Cursor;

use calamine::{DataRef, Reader, Xlsx};

use crate::ooxml::CFB_MAGIC;
use crate::text::decode;
use crate::util::{DocBuilder, collapse_ws};
use crate::{DocumentKind, ParseError, ParsedDocument};

const XLSX: &str = "Excel workbook";

/// Renders rows as `header: value` blocks.
#[derive(Default)]
struct RowRenderer {
    headers: Option<Vec<String>>,
}

impl RowRenderer {
    /// Takes the next row of cell texts (by column), pushing a block unless it is the
    /// header row or empty.
    fn row(&mut self, cells: &[String], numbered: bool, doc: &mut DocBuilder) {
        if cells.iter().all(|c| c.is_empty()) {
            return;
        }
        let Some(headers) = &self.headers else {
            if looks_like_header(cells) {
                self.headers = Some(
                    cells
                        .iter()
                        .enumerate()
                        .map(|(i, h)| {
                            if h.is_empty() {
                                column_name(i, numbered)
                            } else {
                                h.clone()
                            }
                        })
                        .collect(),
                );
                return;
            }
            self.headers = Some(Vec::new());
            return self.row(cells, numbered, doc);
        };
        let mut text = String::new();
        for (i, value) in cells.iter().enumerate() {
            if value.is_empty() {
                continue;
            }
            let header = headers
                .get(i)
                .cloned()
                .unwrap_or_else(|| column_name(i, numbered));
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&header);
            text.push_str(": ");
            text.push_str(value);
        }
        doc.push_block(text);
    }
}

/// A header row has text cells only, none of them numbers.
fn looks_like_header(cells: &[String]) -> bool {
    let filled: Vec<&String> = cells.iter().filter(|c| !c.is_empty()).collect();
    !filled.is_empty()
        && filled
            .iter()
            .all(|c| c.parse::<f64>().is_err() && c.chars().count() <= 200)
}

/// `A`, `B`, ... `AA` for sheets; `column 1`, `column 2`, ... for CSV.
fn column_name(index: usize, numbered: bool) -> String {
    if numbered {
        return format!("column {}", index + 1);
    }
    let mut n = index + 1;
    let mut out = Vec::new();
    while n > 0 {
        let rem = (n - 1) % 26;
        out.push(char::from(b'A' + u8::try_from(rem).unwrap_or(0)));
        n = (n - 1) / 26;
    }
    out.iter().rev().collect()
}

/// Parses an `.xlsx`/`.xlsm` workbook.
pub(crate) fn parse_xlsx(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    if bytes.starts_with(CFB_MAGIC) {
        return Err(ParseError::Encrypted(XLSX.to_owned()));
    }
    if !bytes.starts_with(b"PK") {
        return Err(ParseError::corrupt(
            XLSX,
            "not a zip-based Excel file (a legacy .xls must be saved as .xlsx)",
        ));
    }
    let mut workbook: Xlsx<_> = Xlsx::new(Cursor::new(bytes)).map_err(|e| {
        ParseError::corrupt(XLSX, format!("{e}; the file may be truncated or damaged"))
    })?;
    let title = crate::ooxml::Package::open(bytes, XLSX)
        .ok()
        .and_then(|mut pkg| pkg.core_title());
    let mut doc = DocBuilder::new(DocumentKind::Xlsx);
    for name in workbook.sheet_names() {
        if doc.full() {
            break;
        }
        doc.clear_headings();
        doc.set_heading(1, &name);
        // charts and dialog sheets have no cells
        if let Ok(mut cells) = workbook.worksheet_cells_reader(&name) {
            let mut renderer = RowRenderer::default();
            let mut current_row: Option<u32> = None;
            let mut row: Vec<String> = Vec::new();
            loop {
                let cell = cells.next_cell().map_err(|e| {
                    ParseError::corrupt(XLSX, format!("sheet {name:?} cannot be read ({e})"))
                })?;
                let Some(cell) = cell else { break };
                let (r, c) = cell.get_position();
                if current_row != Some(r) {
                    if current_row.is_some() {
                        renderer.row(&row, false, &mut doc);
                        row.clear();
                    }
                    current_row = Some(r);
                    if doc.full() {
                        break;
                    }
                }
                let value = cell_text(cell.get_value());
                if value.is_empty() {
                    continue;
                }
                let c = usize::try_from(c).unwrap_or(usize::MAX);
                // a cell far to the right must not allocate the columns before it
                if c >= 16_384 {
                    continue;
                }
                if row.len() <= c {
                    row.resize(c + 1, String::new());
                }
                row[c] = value;
            }
            renderer.row(&row, false, &mut doc);
        }
        doc.end_page();
    }
    doc.finish(title)
}

fn cell_text(value: &DataRef<'_>) -> String {
    match value {
        DataRef::Int(i) => i.to_string(),
        DataRef::Float(f) => format_float(*f),
        DataRef::String(s) => collapse_ws(s),
        DataRef::SharedString(s) => collapse_ws(s),
        DataRef::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        DataRef::DateTime(dt) => {
            let (y, mo, d, h, mi, s, _) = dt.to_ymd_hms_milli();
            if dt.is_duration() {
                let total = dt.as_f64() * 24.0;
                let hours = total.trunc();
                return format!("{hours}:{mi:02}:{s:02}");
            }
            if dt.as_f64() < 1.0 {
                format!("{h:02}:{mi:02}:{s:02}")
            } else if h == 0 && mi == 0 && s == 0 {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            }
        }
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => e.to_string(),
        DataRef::Empty => String::new(),
    }
}

/// Whole numbers without a fraction, others as Rust prints them.
fn format_float(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.0}")
    } else {
        f.to_string()
    }
}

/// Parses CSV or TSV (`tab` forces tabs; otherwise the delimiter is sniffed).
pub(crate) fn parse_csv(bytes: &[u8], tab: bool) -> Result<ParsedDocument, ParseError> {
    let text = decode(bytes, "CSV file")?;
    let delimiter = if tab { b'\t' } else { sniff_delimiter(&text) };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(text.as_bytes());
    let mut doc = DocBuilder::new(DocumentKind::Csv);
    let mut renderer = RowRenderer::default();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {
                let cells: Vec<String> = record.iter().map(collapse_ws).collect();
                renderer.row(&cells, true, &mut doc);
                if doc.full() {
                    break;
                }
            }
            Ok(false) => break,
            Err(e) => return Err(ParseError::corrupt("CSV file", e)),
        }
    }
    doc.finish(None)
}

/// The most frequent of `,`, `;`, tab and `|` on the first line, outside quotes.
fn sniff_delimiter(text: &str) -> u8 {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut counts = [0usize; 4];
    let candidates = [b',', b';', b'\t', b'|'];
    let mut quoted = false;
    for b in first.bytes() {
        if b == b'"' {
            quoted = !quoted;
        } else if !quoted && let Some(i) = candidates.iter().position(|c| *c == b) {
            counts[i] += 1;
        }
    }
    let mut best = 0;
    for i in 1..counts.len() {
        if counts[i] > counts[best] {
            best = i;
        }
    }
    candidates[best]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_and_numbers() {
        assert_eq!(column_name(0, false), "A");
        assert_eq!(column_name(25, false), "Z");
        assert_eq!(column_name(26, false), "AA");
        assert_eq!(column_name(2, true), "column 3");
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(2.5), "2.5");
        assert_eq!(sniff_delimiter("a;b;\"c,d\"\n1;2;3"), b';');
    }
}
