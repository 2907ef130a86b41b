//! Word documents (`.docx`): paragraphs, headings from paragraph styles, lists, tables;
//! pages follow Word's rendered and explicit page breaks.

use std::collections::HashMap;

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::ooxml::{Package, attr, entity, local};
use crate::util::{DocBuilder, collapse_ws};
use crate::{DocumentKind, ParseError, ParsedDocument};

const FORMAT: &str = "Word document";

/// A paragraph being read (text boxes nest paragraphs inside paragraphs).
#[derive(Default)]
struct Para {
    text: String,
    style: Option<String>,
    outline: Option<u8>,
    list_level: Option<usize>,
}

/// Parses a `.docx` file.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let mut pkg = Package::open(bytes, FORMAT)?;
    let main = main_part(&mut pkg)?;
    let styles = match pkg.read("word/styles.xml")? {
        Some(xml) => heading_styles(&xml),
        None => HashMap::new(),
    };
    let xml = pkg.read_required(&main)?;
    let mut doc = DocBuilder::new(DocumentKind::Docx);
    walk(&xml, &styles, &mut doc).map_err(|e| pkg.xml_error(&main, e))?;
    let title = pkg.core_title();
    doc.finish(title)
}

/// The main document part, from the package relationships (`word/document.xml` usually).
fn main_part(pkg: &mut Package<'_>) -> Result<String, ParseError> {
    let rels = pkg.relationships("")?;
    let from_rels = rels
        .values()
        .find(|(kind, _)| kind.ends_with("/officeDocument"))
        .map(|(_, target)| target.clone());
    match from_rels {
        Some(target) if pkg.has(&target) => Ok(target),
        _ if pkg.has("word/document.xml") => Ok("word/document.xml".to_owned()),
        _ => Err(ParseError::corrupt(
            FORMAT,
            "word/document.xml is missing (is this really a .docx file?)",
        )),
    }
}

/// Style id → heading level, from `w:name` "heading N" / "Title" or `w:outlineLvl`.
fn heading_styles(xml: &str) -> HashMap<String, u8> {
    let mut out = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut current: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if local(&e) == "style" => current = attr(&e, "styleId"),
            Ok(Event::Empty(e)) => {
                let Some(id) = current.as_ref() else { continue };
                match local(&e).as_str() {
                    "name" => {
                        let name = attr(&e, "val").unwrap_or_default().to_ascii_lowercase();
                        if name == "title" {
                            out.insert(id.clone(), 1);
                        } else if let Some(n) = name.strip_prefix("heading ")
                            && let Ok(n) = n.trim().parse::<u8>()
                        {
                            out.insert(id.clone(), n.clamp(1, 9));
                        }
                    }
                    "outlineLvl" => {
                        if let Some(n) = attr(&e, "val").and_then(|v| v.parse::<u8>().ok())
                            && n < 9
                        {
                            out.entry(id.clone()).or_insert(n + 1);
                        }
                    }
                    _ => {}
                }
            }
            Ok(Event::End(e)) if e.local_name().as_ref() == "style" => current = None,
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out
}

/// The level of Word's built-in heading style ids (`Heading2`, `Title`) when
/// `styles.xml` does not say.
fn builtin_heading(style_id: &str) -> Option<u8> {
    let lower = style_id.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    let n = lower.strip_prefix("heading")?.trim().parse::<u8>().ok()?;
    (1..=9).contains(&n).then_some(n)
}

/// The state of the walk over `document.xml`.
#[derive(Default)]
struct Walk {
    paras: Vec<Para>,
    in_text: bool,
    runs: usize,
    skip: usize,
    tables: usize,
    row: Option<Vec<String>>,
    cell: Option<String>,
    /// Text was added to the current page since the last page break.
    page_has_text: bool,
}

impl Walk {
    fn push_text(&mut self, text: &str) {
        if let Some(p) = self.paras.last_mut() {
            p.text.push_str(text);
        }
    }

    /// A page break: the text of the paragraph so far stays on the page that ends.
    fn page_break(&mut self, doc: &mut DocBuilder) {
        if self.tables > 0 || self.paras.len() > 1 {
            return;
        }
        let partial = self.paras.last().is_some_and(|p| !p.text.trim().is_empty());
        if partial && let Some(p) = self.paras.last_mut() {
            let text = std::mem::take(&mut p.text);
            let para = Para {
                text,
                style: p.style.clone(),
                outline: p.outline,
                list_level: p.list_level,
            };
            self.emit(para, doc);
        }
        if self.page_has_text {
            doc.end_page();
            self.page_has_text = false;
        }
    }

    fn emit(&mut self, para: Para, doc: &mut DocBuilder) {
        let text = para
            .text
            .split('\n')
            .map(collapse_ws)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if text.is_empty() {
            return;
        }
        if let Some(cell) = self.cell.as_mut() {
            if !cell.is_empty() {
                cell.push(' ');
            }
            cell.push_str(&collapse_ws(&text));
            return;
        }
        self.page_has_text = true;
        if let Some(level) = para.outline {
            doc.heading(level, &text);
        } else if let Some(level) = para.list_level {
            doc.push_block(format!("{}- {text}", "  ".repeat(level)));
        } else {
            doc.push_block(text);
        }
    }
}

fn walk(xml: &str, styles: &HashMap<String, u8>, doc: &mut DocBuilder) -> Result<(), String> {
    let mut reader = Reader::from_str(xml);
    let mut w = Walk::default();
    loop {
        if doc.full() {
            return Ok(());
        }
        let event = reader.read_event().map_err(|e| e.to_string())?;
        match event {
            Event::Start(e) => {
                let name = local(&e);
                if w.skip > 0 {
                    w.skip += 1;
                    continue;
                }
                match name.as_str() {
                    // the fallback repeats the text of the preferred content; moved-from
                    // text is repeated where it moved to
                    "Fallback" | "moveFrom" | "instrText" | "delText" => w.skip = 1,
                    "p" => w.paras.push(Para::default()),
                    "r" => w.runs += 1,
                    "t" => w.in_text = true,
                    "tbl" => w.tables += 1,
                    "tr" if w.tables == 1 => w.row = Some(Vec::new()),
                    "tc" if w.tables == 1 => w.cell = Some(String::new()),
                    _ => {}
                }
            }
            Event::Empty(e) => {
                if w.skip > 0 {
                    continue;
                }
                match local(&e).as_str() {
                    "pStyle" => {
                        let style = attr(&e, "val");
                        if let Some(p) = w.paras.last_mut() {
                            let level = style.as_deref().and_then(|s| {
                                styles.get(s).copied().or_else(|| builtin_heading(s))
                            });
                            if let Some(level) = level {
                                p.outline = p.outline.or(Some(level));
                            }
                            p.style = style;
                        }
                    }
                    "outlineLvl" => {
                        if let Some(p) = w.paras.last_mut()
                            && let Some(n) = attr(&e, "val").and_then(|v| v.parse::<u8>().ok())
                            && n < 9
                        {
                            p.outline = Some(n + 1);
                        }
                    }
                    "ilvl" => {
                        if let Some(p) = w.paras.last_mut() {
                            let level = attr(&e, "val").and_then(|v| v.parse::<usize>().ok());
                            p.list_level = Some(level.unwrap_or(0).min(8));
                        }
                    }
                    "numId" => {
                        if let Some(p) = w.paras.last_mut() {
                            // numId 0 switches numbering off
                            if attr(&e, "val").as_deref() == Some("0") {
                                p.list_level = None;
                            } else if p.list_level.is_none() {
                                p.list_level = Some(0);
                            }
                        }
                    }
                    "tab" if w.runs > 0 => w.push_text("\t"),
                    "br" if w.runs > 0 => {
                        if attr(&e, "type").as_deref() == Some("page") {
                            w.page_break(doc);
                        } else {
                            w.push_text("\n");
                        }
                    }
                    "cr" if w.runs > 0 => w.push_text("\n"),
                    "noBreakHyphen" if w.runs > 0 => w.push_text("-"),
                    "lastRenderedPageBreak" => w.page_break(doc),
                    "p" => {
                        // an empty paragraph
                    }
                    _ => {}
                }
            }
            Event::End(e) => {
                if w.skip > 0 {
                    w.skip -= 1;
                    continue;
                }
                match e.local_name().as_ref() {
                    "p" => {
                        if let Some(para) = w.paras.pop() {
                            w.emit(para, doc);
                        }
                    }
                    "r" => w.runs = w.runs.saturating_sub(1),
                    "t" => w.in_text = false,
                    "tc" if w.tables == 1 => {
                        if let (Some(cell), Some(row)) = (w.cell.take(), w.row.as_mut()) {
                            row.push(cell);
                        }
                    }
                    "tr" if w.tables == 1 => {
                        if let Some(row) = w.row.take()
                            && row.iter().any(|c| !c.is_empty())
                        {
                            w.page_has_text = true;
                            doc.push_block(row.join(" | "));
                        }
                    }
                    "tbl" => w.tables = w.tables.saturating_sub(1),
                    _ => {}
                }
            }
            Event::Text(t) if w.in_text && w.skip == 0 => w.push_text(&t.xml10_content()),
            Event::CData(t) if w.in_text && w.skip == 0 => {
                w.push_text(&t);
            }
            Event::GeneralRef(r) if w.in_text && w.skip == 0 => w.push_text(&entity(&r)),
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}
