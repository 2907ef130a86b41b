//! Markdown (CommonMark with tables, task lists, footnotes and front matter).

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::text::decode;
use crate::util::{DocBuilder, collapse_ws};
use crate::{DocumentKind, ParseError, ParsedDocument};

#[derive(Default)]
struct State {
    /// Inline text of the current paragraph, list item or heading.
    buf: String,
    /// A list marker waiting for the item's first text.
    prefix: Option<String>,
    /// Nesting of lists: the next number of ordered ones.
    lists: Vec<Option<u64>>,
    heading: Option<u8>,
    code: Option<String>,
    row: Option<Vec<String>>,
    metadata: Option<String>,
    title: Option<String>,
}

impl State {
    fn flush(&mut self, doc: &mut DocBuilder) {
        let text = collapse_ws(&self.buf);
        self.buf.clear();
        let prefix = self.prefix.take();
        if text.is_empty() {
            return;
        }
        match prefix {
            Some(prefix) => doc.push_block(format!("{prefix}{text}")),
            None => doc.push_block(text),
        }
    }
}

/// Parses Markdown: headings open heading paths, paragraphs, list items, code blocks and
/// table rows become blocks.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let source = decode(bytes, "Markdown file")?;
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_MATH;
    let mut doc = DocBuilder::new(DocumentKind::Markdown);
    let mut st = State::default();
    for event in Parser::new_ext(&source, options) {
        if doc.full() {
            break;
        }
        match event {
            Event::Start(tag) => start(tag, &mut st, &mut doc),
            Event::End(tag) => end(tag, &mut st, &mut doc),
            Event::Text(text) => {
                if let Some(meta) = st.metadata.as_mut() {
                    meta.push_str(&text);
                } else if let Some(code) = st.code.as_mut() {
                    code.push_str(&text);
                } else {
                    st.buf.push_str(&text);
                }
            }
            Event::Code(text) | Event::InlineMath(text) => st.buf.push_str(&text),
            Event::DisplayMath(text) => {
                st.buf.push(' ');
                st.buf.push_str(&text);
                st.buf.push(' ');
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let text = strip_tags(&html);
                if !text.trim().is_empty() {
                    st.buf.push(' ');
                    st.buf.push_str(&text);
                }
            }
            Event::FootnoteReference(label) => {
                st.buf.push_str(&format!("[{label}]"));
            }
            Event::SoftBreak | Event::HardBreak => st.buf.push(' '),
            Event::Rule => st.flush(&mut doc),
            Event::TaskListMarker(done) => {
                st.buf.push_str(if done { "[x] " } else { "[ ] " });
            }
        }
    }
    st.flush(&mut doc);
    let title = st.title.take();
    doc.finish(title)
}

fn start(tag: Tag<'_>, st: &mut State, doc: &mut DocBuilder) {
    match tag {
        Tag::Heading { level, .. } => {
            st.flush(doc);
            st.heading = Some(heading_level(level));
        }
        Tag::Paragraph | Tag::BlockQuote(_) | Tag::HtmlBlock => {
            if st.prefix.is_none() {
                st.flush(doc);
            }
        }
        Tag::CodeBlock(_) => {
            st.flush(doc);
            st.code = Some(String::new());
        }
        Tag::List(first) => {
            st.flush(doc);
            st.lists.push(first);
        }
        Tag::Item => {
            st.flush(doc);
            let depth = st.lists.len().saturating_sub(1);
            let indent = "  ".repeat(depth);
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
        Tag::Table(_) => st.flush(doc),
        Tag::TableHead | Tag::TableRow => {
            st.flush(doc);
            st.row = Some(Vec::new());
        }
        Tag::TableCell => st.buf.clear(),
        Tag::FootnoteDefinition(label) => {
            st.flush(doc);
            st.prefix = Some(format!("[{label}]: "));
        }
        Tag::MetadataBlock(_) => st.metadata = Some(String::new()),
        Tag::DefinitionList
        | Tag::DefinitionListTitle
        | Tag::DefinitionListDefinition
        | Tag::Emphasis
        | Tag::Strong
        | Tag::Strikethrough
        | Tag::Superscript
        | Tag::Subscript
        | Tag::Link { .. }
        | Tag::Image { .. } => {}
    }
}

fn end(tag: TagEnd, st: &mut State, doc: &mut DocBuilder) {
    match tag {
        TagEnd::Heading(_) => {
            let level = st.heading.take().unwrap_or(1);
            let text = std::mem::take(&mut st.buf);
            doc.heading(level, &text);
        }
        TagEnd::Paragraph => {
            // a loose list item keeps its paragraphs together under the marker
            if st.prefix.is_none() {
                st.flush(doc);
            } else {
                st.buf.push(' ');
            }
        }
        TagEnd::Item | TagEnd::BlockQuote(_) | TagEnd::HtmlBlock | TagEnd::FootnoteDefinition => {
            st.flush(doc)
        }
        TagEnd::List(_) => {
            st.flush(doc);
            st.lists.pop();
        }
        TagEnd::CodeBlock => {
            if let Some(code) = st.code.take() {
                doc.lines(&code);
            }
        }
        TagEnd::TableCell => {
            let cell = collapse_ws(&std::mem::take(&mut st.buf));
            if let Some(row) = st.row.as_mut() {
                row.push(cell);
            }
        }
        TagEnd::TableHead | TagEnd::TableRow => {
            if let Some(row) = st.row.take()
                && row.iter().any(|c| !c.is_empty())
            {
                doc.push_block(row.join(" | "));
            }
        }
        TagEnd::MetadataBlock(_) => {
            if let Some(meta) = st.metadata.take() {
                st.title = front_matter_title(&meta);
            }
        }
        TagEnd::Table
        | TagEnd::DefinitionList
        | TagEnd::DefinitionListTitle
        | TagEnd::DefinitionListDefinition
        | TagEnd::Emphasis
        | TagEnd::Strong
        | TagEnd::Strikethrough
        | TagEnd::Superscript
        | TagEnd::Subscript
        | TagEnd::Link
        | TagEnd::Image => {}
    }
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// `title:` of YAML front matter, unquoted.
fn front_matter_title(meta: &str) -> Option<String> {
    meta.lines().find_map(|line| {
        let value = line.strip_prefix("title:")?.trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'').trim();
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// The text of an HTML fragment without its tags and comments.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let after = &rest[lt..];
        let close = if after.starts_with("<!--") {
            after.find("-->").map(|i| i + 3)
        } else {
            after.find('>').map(|i| i + 1)
        };
        match close {
            Some(n) => rest = &after[n..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_tags_and_comments() {
        assert_eq!(strip_tags("a <b>bold</b> <!-- x > y --> c"), "a bold  c");
        assert_eq!(
            front_matter_title("x: 1\ntitle: \"Hello\"\n"),
            Some("Hello".into())
        );
    }
}
