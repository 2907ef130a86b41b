//! The parsed form of a document: pages of blocks, plus transcript segments.

use std::fmt;

/// The kind of a document, decided by [`crate::detect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocumentKind {
    /// Plain text (also source code, logs and other text files).
    Text,
    /// Markdown.
    Markdown,
    /// HTML or XHTML.
    Html,
    /// PDF with a text layer.
    Pdf,
    /// Word (OOXML `.docx`).
    Docx,
    /// PowerPoint (OOXML `.pptx`); one page per slide.
    Pptx,
    /// Excel (OOXML `.xlsx`/`.xlsm`); one page per sheet.
    Xlsx,
    /// Comma- or tab-separated values; one page.
    Csv,
    /// JSON or JSON Lines.
    Json,
    /// A WebVTT or SRT transcript, or the result of transcribing audio or video.
    Transcript,
    /// A PNG, JPEG, TIFF (a page per frame) or WebP image: its text comes from text
    /// recognition, not from a parser of this crate.
    Image,
}

impl DocumentKind {
    /// Every kind, in declaration order.
    pub const ALL: [DocumentKind; 11] = [
        DocumentKind::Text,
        DocumentKind::Markdown,
        DocumentKind::Html,
        DocumentKind::Pdf,
        DocumentKind::Docx,
        DocumentKind::Pptx,
        DocumentKind::Xlsx,
        DocumentKind::Csv,
        DocumentKind::Json,
        DocumentKind::Transcript,
        DocumentKind::Image,
    ];

    /// A stable lowercase name, fit for storage and APIs (`"pdf"`, `"docx"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Text => "text",
            DocumentKind::Markdown => "markdown",
            DocumentKind::Html => "html",
            DocumentKind::Pdf => "pdf",
            DocumentKind::Docx => "docx",
            DocumentKind::Pptx => "pptx",
            DocumentKind::Xlsx => "xlsx",
            DocumentKind::Csv => "csv",
            DocumentKind::Json => "json",
            DocumentKind::Transcript => "transcript",
            DocumentKind::Image => "image",
        }
    }

    /// The kind whose [`DocumentKind::as_str`] is `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<DocumentKind> {
        DocumentKind::ALL
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(name))
    }

    /// The name people know the format by, used in messages (`"PDF"`, `"Word document"`).
    pub fn label(self) -> &'static str {
        match self {
            DocumentKind::Text => "text file",
            DocumentKind::Markdown => "Markdown file",
            DocumentKind::Html => "HTML file",
            DocumentKind::Pdf => "PDF",
            DocumentKind::Docx => "Word document",
            DocumentKind::Pptx => "PowerPoint presentation",
            DocumentKind::Xlsx => "Excel workbook",
            DocumentKind::Csv => "CSV file",
            DocumentKind::Json => "JSON file",
            DocumentKind::Transcript => "transcript",
            DocumentKind::Image => "image",
        }
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A document turned into text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedDocument {
    /// What the document was parsed as.
    pub kind: DocumentKind,
    /// The pages in order; at least one for a non-empty document. PDFs keep every page
    /// (a page without text has no blocks), so `pages[i].number == i + 1` there.
    pub pages: Vec<Page>,
    /// The title when it is cheap to find: PDF/Office metadata, `<title>`, the first
    /// heading, or a Markdown front-matter `title:`.
    pub title: Option<String>,
    /// Timed segments of a transcript (WebVTT, SRT or transcription); empty otherwise.
    pub segments: Vec<AudioSegment>,
    /// The number of pages of the source (PDF pages, slides, sheets; 1 for flowing text
    /// unless it has form feeds or page breaks).
    pub page_count: u32,
    /// PDF pages that look scanned: images cover most of the page and its text layer is
    /// too thin for its area (the rule: `pdf::looks_scanned`). Their text is to come from
    /// text recognition. Empty for other kinds.
    pub scanned: Vec<u32>,
    /// PDF page sizes in points (width, height), by page number - 1; empty for other
    /// kinds.
    pub page_sizes: Vec<(f32, f32)>,
}

impl ParsedDocument {
    /// A document of `pages` read by text recognition (an image's frames, in order): each
    /// page's paragraphs are its text's blank-line separated parts.
    pub fn recognized(kind: DocumentKind, pages: &[String]) -> ParsedDocument {
        ParsedDocument {
            kind,
            page_count: u32::try_from(pages.len()).unwrap_or(u32::MAX),
            pages: pages
                .iter()
                .zip(1u32..)
                .map(|(text, number)| Page::recognized(number, text))
                .collect(),
            title: None,
            segments: Vec::new(),
            scanned: Vec::new(),
            page_sizes: Vec::new(),
        }
    }

    /// All block texts, blocks separated by a blank line and pages by a form feed line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, page) in self.pages.iter().enumerate() {
            if i > 0 {
                out.push_str("\n\x0c\n");
            }
            out.push_str(&page.text());
        }
        out
    }

    /// Whether no block holds any non-whitespace text.
    pub fn is_empty(&self) -> bool {
        self.pages
            .iter()
            .flat_map(|page| page.blocks.iter())
            .all(|block| block.text.trim().is_empty())
    }
}

/// One page (PDF page, slide, sheet, or the whole of a flowing document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// 1-based page number.
    pub number: u32,
    /// The page's paragraphs, headings, list items and table rows, in reading order.
    pub blocks: Vec<Block>,
}

impl Page {
    /// Page `number` of recognized `text`: paragraphs at blank lines, each paragraph's
    /// lines kept (trailing spaces and empty paragraphs dropped).
    pub fn recognized(number: u32, text: &str) -> Page {
        let mut blocks = Vec::new();
        let mut lines: Vec<&str> = Vec::new();
        for line in text.lines().map(str::trim_end).chain(std::iter::once("")) {
            if line.trim().is_empty() {
                if !lines.is_empty() {
                    blocks.push(Block {
                        heading: None,
                        text: lines.join("\n"),
                    });
                    lines.clear();
                }
            } else {
                lines.push(line);
            }
        }
        Page { number, blocks }
    }

    /// The page's block texts, separated by a blank line.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// A paragraph-like piece of text and the heading path it sits under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The heading path in force, outermost first, joined by `" > "`
    /// (e.g. `"Intro > Setup"`); `None` before the first heading or when the format
    /// has no headings. A heading's own block carries the path it opens.
    pub heading: Option<String>,
    /// The text; lines are separated by `\n`, never empty.
    pub text: String,
}

/// One timed piece of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioSegment {
    /// Start in seconds.
    pub start: f64,
    /// End in seconds, when known.
    pub end: Option<f64>,
    /// The speaker's display name (`""` when unknown).
    pub speaker: String,
    /// The speaker label as it appeared in the source (e.g. `SPEAKER_01`), when any.
    pub original_speaker: Option<String>,
    /// What was said.
    pub text: String,
}
