//! Shared helpers: the document builder, heading paths, whitespace clean-up, limits.

use crate::{Block, DocumentKind, Page, ParseError, ParsedDocument};

/// The most text a document may expand to; past it parsing stops with `TooLarge`.
pub(crate) const MAX_TEXT_BYTES: usize = 64 * 1024 * 1024;

/// The heading levels in force, outermost first.
#[derive(Debug, Default)]
pub(crate) struct HeadingStack {
    stack: Vec<(u8, String)>,
}

impl HeadingStack {
    /// Opens a heading of `level` (1 = outermost), closing any at the same or a deeper level.
    pub(crate) fn push(&mut self, level: u8, title: String) {
        while self.stack.last().is_some_and(|(l, _)| *l >= level) {
            self.stack.pop();
        }
        self.stack.push((level, title));
    }

    /// The path in force, e.g. `"Intro > Setup"`.
    pub(crate) fn path(&self) -> Option<String> {
        if self.stack.is_empty() {
            return None;
        }
        let parts: Vec<&str> = self.stack.iter().map(|(_, t)| t.as_str()).collect();
        Some(parts.join(" > "))
    }

    /// Forgets every heading (e.g. at a new slide).
    pub(crate) fn clear(&mut self) {
        self.stack.clear();
    }
}

/// Collects pages and blocks while a parser walks its input.
#[derive(Debug)]
pub(crate) struct DocBuilder {
    kind: DocumentKind,
    pages: Vec<Page>,
    blocks: Vec<Block>,
    headings: HeadingStack,
    heading_path: Option<String>,
    /// The first heading seen, a cheap title.
    pub(crate) first_heading: Option<String>,
    bytes: usize,
    overflow: bool,
}

impl DocBuilder {
    pub(crate) fn new(kind: DocumentKind) -> Self {
        Self {
            kind,
            pages: Vec::new(),
            blocks: Vec::new(),
            headings: HeadingStack::default(),
            heading_path: None,
            first_heading: None,
            bytes: 0,
            overflow: false,
        }
    }

    /// Whether the text limit was hit; parsers stop early when it is.
    pub(crate) fn full(&self) -> bool {
        self.overflow
    }

    /// Opens a heading and adds its text as a block under the new path.
    pub(crate) fn heading(&mut self, level: u8, text: &str) {
        let title = collapse_ws(text);
        if title.is_empty() {
            return;
        }
        if self.first_heading.is_none() {
            self.first_heading = Some(title.clone());
        }
        self.headings.push(level.max(1), title.clone());
        self.heading_path = self.headings.path();
        self.push_block(title);
    }

    /// Sets the heading path directly (slide titles, sheet names), without a block.
    pub(crate) fn set_heading(&mut self, level: u8, title: &str) {
        let title = collapse_ws(title);
        if title.is_empty() {
            return;
        }
        self.headings.push(level.max(1), title);
        self.heading_path = self.headings.path();
    }

    /// Forgets the headings in force.
    pub(crate) fn clear_headings(&mut self) {
        self.headings.clear();
        self.heading_path = None;
    }

    /// Adds a block whose line breaks matter (code, preformatted text, table rows).
    pub(crate) fn lines(&mut self, text: &str) {
        let text = clean_lines(text);
        self.push_block(text);
    }

    /// Adds an already clean block as is (it is skipped when blank).
    pub(crate) fn push_block(&mut self, text: String) {
        if self.overflow || text.trim().is_empty() {
            return;
        }
        self.bytes += text.len();
        if self.bytes > MAX_TEXT_BYTES {
            self.overflow = true;
            return;
        }
        self.blocks.push(Block {
            heading: self.heading_path.clone(),
            text,
        });
    }

    /// Ends the current page (even an empty one) and starts the next.
    pub(crate) fn end_page(&mut self) {
        let number = u32::try_from(self.pages.len() + 1).unwrap_or(u32::MAX);
        self.pages.push(Page {
            number,
            blocks: std::mem::take(&mut self.blocks),
        });
    }

    /// The document; `Empty` when it has no text, `TooLarge` when over the limit.
    pub(crate) fn finish(self, title: Option<String>) -> Result<ParsedDocument, ParseError> {
        self.finish_with(title, false)
    }

    /// As [`DocBuilder::finish`]; `may_be_empty`: a document without text is not an error
    /// (a PDF of scanned pages, whose text recognition reads).
    pub(crate) fn finish_with(
        mut self,
        title: Option<String>,
        may_be_empty: bool,
    ) -> Result<ParsedDocument, ParseError> {
        if self.overflow {
            return Err(too_large_text());
        }
        if !self.blocks.is_empty() || self.pages.is_empty() {
            self.end_page();
        }
        let doc = ParsedDocument {
            kind: self.kind,
            page_count: u32::try_from(self.pages.len()).unwrap_or(u32::MAX),
            pages: self.pages,
            title: title
                .map(|t| collapse_ws(&t))
                .filter(|t| !t.is_empty())
                .or(self.first_heading),
            segments: Vec::new(),
            scanned: Vec::new(),
            page_sizes: Vec::new(),
        };
        if doc.is_empty() && !may_be_empty {
            return Err(ParseError::Empty);
        }
        Ok(doc)
    }
}

pub(crate) fn too_large_text() -> ParseError {
    ParseError::TooLarge(format!(
        "it expands to more than {} MiB of text; split it into smaller files",
        MAX_TEXT_BYTES / (1024 * 1024)
    ))
}

/// Collapses every whitespace run (newlines included) to one space and trims; drops
/// control characters.
pub(crate) fn collapse_ws(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
        } else if c.is_control() || c == '\u{feff}' || c == '\u{fffe}' {
            continue;
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    out
}

/// Keeps line breaks but trims each line's trailing whitespace, turns `\r\n`/`\r` into
/// `\n`, drops control characters (tabs stay), and drops leading and trailing blank lines.
pub(crate) fn clean_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let normalized;
    let s = if s.contains('\r') {
        normalized = s.replace("\r\n", "\n").replace('\r', "\n");
        normalized.as_str()
    } else {
        s
    };
    for line in s.split('\n') {
        let line: String = line
            .chars()
            .filter(|c| *c == '\t' || !(c.is_control() || *c == '\u{feff}'))
            .collect();
        let line = line.trim_end();
        if out.is_empty() && line.trim().is_empty() {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out
}

/// Splits text into paragraphs at blank lines; each keeps its inner line breaks.
pub(crate) fn paragraphs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in s.lines() {
        if line.trim().is_empty() {
            if !cur.is_empty() {
                out.push(clean_lines(&cur));
                cur.clear();
            }
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    if !cur.is_empty() {
        out.push(clean_lines(&cur));
    }
    out.retain(|p| !p.is_empty());
    out
}

/// Upper-cases the first letter of each word of an all-caps name (`JOHN SMITH` →
/// `John Smith`).
pub(crate) fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if c.is_alphabetic() {
            if start {
                out.extend(c.to_uppercase());
            } else {
                out.extend(c.to_lowercase());
            }
            start = false;
        } else {
            out.push(c);
            start = c.is_whitespace() || c == '-' || c == '\'';
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_stack_builds_paths() {
        let mut h = HeadingStack::default();
        h.push(1, "Intro".into());
        h.push(2, "Setup".into());
        assert_eq!(h.path().as_deref(), Some("Intro > Setup"));
        h.push(2, "Run".into());
        assert_eq!(h.path().as_deref(), Some("Intro > Run"));
        h.push(1, "Next".into());
        assert_eq!(h.path().as_deref(), Some("Next"));
    }

    #[test]
    fn paragraphs_split_on_blank_lines() {
        let p = paragraphs("\n\na\nb\n\n  \nc  \r\n\n");
        assert_eq!(p, vec!["a\nb".to_string(), "c".to_string()]);
    }

    #[test]
    fn collapse_and_title_case() {
        assert_eq!(collapse_ws("  a \n\t b\u{0}c "), "a bc");
        assert_eq!(title_case("JOHN O'NEIL-SMITH"), "John O'Neil-Smith");
    }
}
