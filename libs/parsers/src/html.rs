//! HTML: a tag-soup walk over the WHATWG tokenizer of `html5gum`; scripts, styles and
//! hidden elements are dropped, headings open heading paths.

use html5gum::{DefaultEmitter, Token, Tokenizer};

use crate::text::decode;
use crate::util::{DocBuilder, clean_lines, collapse_ws};
use crate::{DocumentKind, ParseError, ParsedDocument};

/// Elements whose whole content is dropped.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "select",
    "datalist", "audio", "video",
];

/// Elements without an end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements that start and end a block of text.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "header",
    "hgroup",
    "hr",
    "html",
    "legend",
    "main",
    "menu",
    "nav",
    "p",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
];

#[derive(Default)]
struct State {
    buf: String,
    prefix: Option<String>,
    lists: Vec<Option<u64>>,
    skip: Vec<String>,
    pre: usize,
    heading: Option<u8>,
    in_title: bool,
    title: String,
    row: Option<Vec<String>>,
}

impl State {
    /// Appends text, collapsing whitespace unless inside `<pre>`.
    fn push_text(&mut self, text: &str) {
        if self.in_title {
            self.title.push_str(text);
            return;
        }
        if self.pre > 0 {
            self.buf.push_str(text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                if !self.buf.is_empty() && !self.buf.ends_with([' ', '\n']) {
                    self.buf.push(' ');
                }
            } else {
                self.buf.push(c);
            }
        }
    }

    fn line_break(&mut self) {
        let trimmed = self.buf.trim_end_matches(' ').len();
        self.buf.truncate(trimmed);
        self.buf.push('\n');
    }

    fn flush(&mut self, doc: &mut DocBuilder) {
        if let Some(level) = self.heading.take() {
            let text = std::mem::take(&mut self.buf);
            doc.heading(level, &text);
            return;
        }
        let text = clean_lines(&self.buf);
        self.buf.clear();
        let prefix = self.prefix.take();
        if text.trim().is_empty() {
            return;
        }
        let text = if self.pre > 0 {
            text
        } else {
            text.lines().map(str::trim).collect::<Vec<_>>().join("\n")
        };
        match prefix {
            Some(prefix) => doc.push_block(format!("{prefix}{text}")),
            None => doc.push_block(text),
        }
    }
}

/// Parses an HTML document.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let source = decode(bytes, "HTML file")?;
    let mut emitter = DefaultEmitter::default();
    // script, style, textarea and friends hold raw text, not markup
    emitter.naively_switch_states(true);
    let mut doc = DocBuilder::new(DocumentKind::Html);
    let mut st = State::default();
    for token in Tokenizer::new_with_emitter(source.as_str(), emitter) {
        if doc.full() {
            break;
        }
        let Ok(token) = token;
        match token {
            Token::StartTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                let void = tag.self_closing || VOID.contains(&name.as_str());
                if !st.skip.is_empty() {
                    if !void && st.skip.last().is_some_and(|top| *top == name) {
                        st.skip.push(name);
                    }
                    continue;
                }
                let hidden = tag.attributes.keys().any(|k| k.as_slice() == b"hidden")
                    || tag.attributes.iter().any(|(k, v)| {
                        k.as_slice() == b"aria-hidden" && v.value.as_slice() == b"true"
                    });
                if SKIPPED.contains(&name.as_str()) || (hidden && !void) {
                    if !void {
                        st.skip.push(name);
                    }
                    continue;
                }
                let start = tag
                    .attributes
                    .iter()
                    .find(|(k, _)| k.as_slice() == b"start")
                    .and_then(|(_, v)| std::str::from_utf8(&v.value).ok()?.trim().parse().ok());
                start_tag(&name, start, &mut st, &mut doc);
            }
            Token::EndTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                if !st.skip.is_empty() {
                    if st.skip.last().is_some_and(|top| *top == name) {
                        st.skip.pop();
                    }
                    continue;
                }
                end_tag(&name, &mut st, &mut doc);
            }
            Token::String(text) => {
                if st.skip.is_empty() {
                    st.push_text(&String::from_utf8_lossy(&text.value));
                }
            }
            Token::Comment(_) | Token::Doctype(_) | Token::Error(_) => {}
        }
    }
    st.flush(&mut doc);
    let title = collapse_ws(&st.title);
    doc.finish((!title.is_empty()).then_some(title))
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

fn start_tag(name: &str, start: Option<u64>, st: &mut State, doc: &mut DocBuilder) {
    if let Some(level) = heading_level(name) {
        st.flush(doc);
        st.heading = Some(level);
        return;
    }
    match name {
        "title" => st.in_title = true,
        "br" => st.line_break(),
        "pre" => {
            st.flush(doc);
            st.pre += 1;
        }
        "ul" | "ol" => {
            st.flush(doc);
            st.lists.push((name == "ol").then(|| start.unwrap_or(1)));
        }
        "li" => {
            st.flush(doc);
            let indent = "  ".repeat(st.lists.len().saturating_sub(1));
            let marker = match st.lists.last_mut() {
                Some(Some(n)) => {
                    let marker = format!("{n}. ");
                    *n += 1;
                    marker
                }
                _ => "- ".to_owned(),
            };
            st.prefix = Some(format!("{indent}{marker}"));
        }
        "tr" if st.row.is_none() => {
            st.flush(doc);
            st.row = Some(Vec::new());
        }
        "td" | "th" if st.row.is_some() => st.buf.clear(),
        _ if BLOCKS.contains(&name) => {
            if st.row.is_some() {
                st.push_text(" ");
            } else {
                st.flush(doc);
            }
        }
        _ => {}
    }
}

fn end_tag(name: &str, st: &mut State, doc: &mut DocBuilder) {
    if heading_level(name).is_some() {
        st.flush(doc);
        return;
    }
    match name {
        "title" => st.in_title = false,
        "pre" => {
            st.flush(doc);
            st.pre = st.pre.saturating_sub(1);
        }
        "ul" | "ol" => {
            st.flush(doc);
            st.lists.pop();
        }
        "li" => st.flush(doc),
        "td" | "th" => {
            let cell = collapse_ws(&std::mem::take(&mut st.buf));
            if let Some(row) = st.row.as_mut() {
                row.push(cell);
            }
        }
        "tr" => {
            if let Some(row) = st.row.take()
                && row.iter().any(|c| !c.is_empty())
            {
                doc.push_block(row.join(" | "));
            }
        }
        "table" => {
            if let Some(row) = st.row.take()
                && row.iter().any(|c| !c.is_empty())
            {
                doc.push_block(row.join(" | "));
            }
            st.flush(doc);
        }
        _ if BLOCKS.contains(&name) => {
            if st.row.is_some() {
                st.push_text(" ");
            } else {
                st.flush(doc);
            }
        }
        _ => {}
    }
}
