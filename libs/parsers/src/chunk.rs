//! Token-aware chunking with overlap.
//!
//! The document is cut into units that each fit `max_tokens`: whole paragraphs (blocks,
//! or their blank-line separated parts) when they fit, otherwise their sentences (lines
//! first for JSON, CSV and sheets), then words, then pieces of a word cut by tokens.
//! Units are packed greedily into chunks; a chunk is closed when the next unit would not
//! fit, and also at a change of heading once it holds at least an eighth of
//! `max_tokens` (smaller sections join the next one). A chunk closed for size hands its
//! last sentences (or words), up to `overlap_tokens`, to the next chunk; a chunk closed
//! at a heading change hands nothing over, so text never bleeds into another section.
//!
//! Token counts of units are summed as an estimate and every chunk's text is counted
//! once more as a whole; units are moved to the next chunk until that count is within
//! `max_tokens`. The counter should count the text's tokens without special tokens.

use unicode_segmentation::UnicodeSegmentation;

use crate::transcript::segment_line;
use crate::util::paragraphs;
use crate::{DocumentKind, ParsedDocument};

/// How to cut documents into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// The most tokens a chunk may hold (at least 1).
    pub max_tokens: usize,
    /// Tokens of the previous chunk's end repeated at the start of the next one (capped
    /// at half of `max_tokens`).
    pub overlap_tokens: usize,
}

impl Default for ChunkOptions {
    /// 256 tokens (the sequence length of MiniLM embedders) with 32 of overlap.
    fn default() -> Self {
        Self {
            max_tokens: 256,
            overlap_tokens: 32,
        }
    }
}

/// A piece of a document, ready to embed and to cite.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Position in the document, from 0.
    pub index: u32,
    /// The text: paragraphs separated by a blank line.
    pub text: String,
    /// The pages the text comes from, sorted and unique.
    pub pages: Vec<u32>,
    /// Where each page's part of `text` starts: (page, byte offset), in text order, the
    /// first at 0. A chunk that spans a page break has more than one.
    pub page_starts: Vec<(u32, usize)>,
    /// The heading path of the section that contributes most of the text.
    pub heading: Option<String>,
    /// Transcripts: the start of the first segment covered, in seconds.
    pub start_time: Option<f64>,
    /// Transcripts: the end of the segments covered, in seconds (`None` when the last
    /// segment's end is unknown).
    pub end_time: Option<f64>,
}

/// How a unit joins the text before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sep {
    Paragraph,
    Line,
    Space,
    None,
}

impl Sep {
    fn as_str(self) -> &'static str {
        match self {
            Sep::Paragraph => "\n\n",
            Sep::Line => "\n",
            Sep::Space => " ",
            Sep::None => "",
        }
    }
}

/// A piece of text that fits in a chunk, with where it comes from.
#[derive(Debug, Clone)]
struct Unit {
    text: String,
    tokens: usize,
    sep: Sep,
    page: u32,
    section: usize,
    start: Option<f64>,
    end: Option<f64>,
}

/// How an overlong piece of text is cut further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Sentences,
    Lines,
    Words,
    Tokens,
}

struct Ctx<'a> {
    max: usize,
    count: &'a dyn Fn(&str) -> usize,
    /// Lines before sentences (structured text).
    lines_first: bool,
}

/// Cuts `doc` into chunks of at most `opts.max_tokens` tokens as counted by
/// `count_tokens`, each starting with up to `opts.overlap_tokens` of the previous one's
/// end. Output is deterministic. Transcripts are cut along their segments and chunks
/// carry the segments' times; other documents' chunks carry their pages and heading.
pub fn chunk(
    doc: &ParsedDocument,
    opts: &ChunkOptions,
    count_tokens: &dyn Fn(&str) -> usize,
) -> Vec<Chunk> {
    let max = opts.max_tokens.max(1);
    let overlap = opts.overlap_tokens.min(max / 2);
    let ctx = Ctx {
        max,
        count: count_tokens,
        lines_first: matches!(
            doc.kind,
            DocumentKind::Json | DocumentKind::Csv | DocumentKind::Xlsx
        ),
    };
    let (units, sections) = units_of(doc, &ctx);
    pack(&units, &sections, &ctx, overlap)
}

/// The units of a document and the heading of each section.
fn units_of(doc: &ParsedDocument, ctx: &Ctx<'_>) -> (Vec<Unit>, Vec<Option<String>>) {
    let mut units = Vec::new();
    let mut sections: Vec<Option<String>> = Vec::new();
    if doc.kind == DocumentKind::Transcript && !doc.segments.is_empty() {
        sections.push(None);
        for segment in &doc.segments {
            let text = segment_line(segment);
            if text.trim().is_empty() {
                continue;
            }
            let proto = Unit {
                text: String::new(),
                tokens: 0,
                sep: Sep::Line,
                page: 1,
                section: 0,
                start: Some(segment.start),
                end: segment.end,
            };
            split_into(&text, Level::Sentences, &proto, ctx, &mut units);
        }
        return (units, sections);
    }
    for page in &doc.pages {
        for block in &page.blocks {
            if sections.last() != Some(&block.heading) {
                sections.push(block.heading.clone());
            }
            let proto = Unit {
                text: String::new(),
                tokens: 0,
                sep: Sep::Paragraph,
                page: page.number,
                section: sections.len() - 1,
                start: None,
                end: None,
            };
            for para in paragraphs(&block.text) {
                let first = if ctx.lines_first {
                    Level::Lines
                } else {
                    Level::Sentences
                };
                split_into(&para, first, &proto, ctx, &mut units);
            }
        }
    }
    (units, sections)
}

/// Pushes `text` as one unit when it fits, otherwise cut at `level` and below. The first
/// unit takes `proto.sep`.
fn split_into(text: &str, level: Level, proto: &Unit, ctx: &Ctx<'_>, out: &mut Vec<Unit>) {
    // indentation stays (code, pretty-printed JSON); trailing whitespace goes
    let text = text.trim_end().trim_start_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return;
    }
    let tokens = (ctx.count)(text);
    if tokens <= ctx.max {
        out.push(Unit {
            text: text.to_owned(),
            tokens,
            ..proto.clone()
        });
        return;
    }
    let next = match (level, ctx.lines_first) {
        (Level::Lines, true) => Level::Sentences,
        (Level::Sentences, true) => Level::Words,
        (Level::Sentences, false) => Level::Lines,
        (Level::Lines, false) => Level::Words,
        (Level::Words | Level::Tokens, _) => Level::Tokens,
    };
    if level == Level::Tokens {
        split_by_tokens(text, proto, ctx, out);
        return;
    }
    let pieces = pieces(text, level);
    if pieces.len() <= 1 {
        split_into(text, next, proto, ctx, out);
        return;
    }
    for (i, (sep, piece)) in pieces.into_iter().enumerate() {
        let sub = Unit {
            sep: if i == 0 { proto.sep } else { sep },
            ..proto.clone()
        };
        split_into(piece, next, &sub, ctx, out);
    }
}

/// Cuts text at `level`, each piece with how it joins the one before.
fn pieces(text: &str, level: Level) -> Vec<(Sep, &str)> {
    let bounds: Vec<(usize, &str)> = match level {
        Level::Sentences => {
            // wrapped lines do not end sentences
            let flat = text.replace(['\n', '\r'], " ");
            flat.split_sentence_bound_indices()
                .map(|(i, s)| (i, &text[i..i + s.len()]))
                .collect()
        }
        Level::Lines => {
            let mut offset = 0;
            text.split_inclusive('\n')
                .map(|l| {
                    let start = offset;
                    offset += l.len();
                    (start, l)
                })
                .collect()
        }
        Level::Words => {
            let mut words = Vec::new();
            let mut start = None;
            for (i, c) in text.char_indices() {
                if c.is_whitespace() {
                    if let Some(s) = start.take() {
                        words.push((s, &text[s..i]));
                    }
                } else if start.is_none() {
                    start = Some(i);
                }
            }
            if let Some(s) = start {
                words.push((s, &text[s..]));
            }
            words
        }
        Level::Tokens => vec![(0, text)],
    };
    let mut out = Vec::new();
    let mut prev_end = 0;
    for (start, piece) in bounds {
        if piece.trim().is_empty() {
            continue;
        }
        // lines keep their indentation
        let trimmed = if level == Level::Lines {
            piece.trim_end()
        } else {
            piece.trim()
        };
        let lead = piece.len() - piece.trim_start().len();
        let lead = if level == Level::Lines { 0 } else { lead };
        let begin = start + lead;
        let gap = text.get(prev_end..begin).unwrap_or("");
        let sep = if gap.contains('\n') {
            Sep::Line
        } else if gap.is_empty() {
            Sep::None
        } else {
            Sep::Space
        };
        prev_end = begin + trimmed.len();
        out.push((sep, trimmed));
    }
    out
}

/// Cuts one overlong word into the longest prefixes that fit `max`, by binary search
/// over character boundaries.
fn split_by_tokens(text: &str, proto: &Unit, ctx: &Ctx<'_>, out: &mut Vec<Unit>) {
    let mut rest = text;
    let mut first = true;
    // characters per piece so far: the next window is twice that, so that the search
    // does not count far more text than a piece can hold
    let mut hint = 64usize;
    while !rest.is_empty() {
        let window_chars = hint
            .saturating_mul(2)
            .min(ctx.max.saturating_mul(32))
            .max(1);
        let window_end = rest
            .char_indices()
            .nth(window_chars)
            .map_or(rest.len(), |(i, _)| i);
        let window = &rest[..window_end];
        let boundaries: Vec<usize> = window
            .char_indices()
            .map(|(i, _)| i)
            .skip(1)
            .chain(std::iter::once(window.len()))
            .collect();
        // the largest prefix whose count fits
        let (mut lo, mut hi) = (0usize, boundaries.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let end = boundaries[mid - 1];
            if (ctx.count)(&rest[..end]) <= ctx.max {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        // at least one character, so that cutting always moves on
        let end = if lo == 0 {
            boundaries[0]
        } else {
            boundaries[lo - 1]
        };
        let piece = &rest[..end];
        hint = piece.chars().count().max(32);
        out.push(Unit {
            text: piece.to_owned(),
            tokens: (ctx.count)(piece),
            sep: if first { proto.sep } else { Sep::None },
            ..proto.clone()
        });
        first = false;
        rest = &rest[end..];
    }
}

/// The least new text (tokens) a chunk holds before it ends at a boundary.
#[derive(Debug, Clone, Copy)]
struct Boundaries {
    section: usize,
    page: usize,
}

struct Packer<'a> {
    ctx: &'a Ctx<'a>,
    sections: &'a [Option<String>],
    overlap: usize,
    cur: Vec<Unit>,
    /// Units at the front of `cur` carried over from the previous chunk.
    carried: usize,
    chunks: Vec<Chunk>,
}

fn pack(units: &[Unit], sections: &[Option<String>], ctx: &Ctx<'_>, overlap: usize) -> Vec<Chunk> {
    let mut p = Packer {
        ctx,
        sections,
        overlap,
        cur: Vec::new(),
        carried: 0,
        chunks: Vec::new(),
    };
    let minimum = Boundaries {
        section: ctx.max / 8,
        page: ctx.max / 4,
    };
    let mut i = 0;
    loop {
        p.fill(units, &mut i, minimum);
        if p.new_units() == 0 {
            break;
        }
        let handed_back = p.close(false);
        if handed_back == 0 {
            break;
        }
        i -= handed_back;
    }
    p.chunks
}

impl Packer<'_> {
    /// Packs the units from `*i` on, closing chunks as they fill up or as sections and
    /// pages end (a chunk crosses a boundary only while it holds less new text than the
    /// boundary's minimum, so that a page is cited by its own chunks).
    fn fill(&mut self, units: &[Unit], i: &mut usize, minimum: Boundaries) {
        while let Some(unit) = units.get(*i) {
            let last = self.cur.last().map(|u| (u.section, u.page));
            let boundary_min = match last {
                Some((section, _)) if section != unit.section => Some(minimum.section),
                Some((_, page)) if page != unit.page => Some(minimum.page),
                _ => None,
            };
            if let Some(min) = boundary_min {
                if self.new_units() == 0 {
                    // carried text belongs to the section (page) before
                    self.cur.clear();
                    self.carried = 0;
                } else if self.new_tokens() >= min {
                    *i -= self.close(false);
                    continue;
                }
            }
            if self.tokens() + unit.tokens > self.ctx.max {
                if self.new_units() > 0 {
                    let carry = last == Some((unit.section, unit.page));
                    *i -= self.close(carry);
                    continue;
                }
                while self.tokens() + unit.tokens > self.ctx.max && self.carried > 0 {
                    self.cur.remove(0);
                    self.carried -= 1;
                }
            }
            self.cur.push(unit.clone());
            *i += 1;
        }
    }
}

impl Packer<'_> {
    fn tokens(&self) -> usize {
        self.cur.iter().map(|u| u.tokens).sum()
    }

    fn new_units(&self) -> usize {
        self.cur.len() - self.carried
    }

    fn new_tokens(&self) -> usize {
        self.cur[self.carried..].iter().map(|u| u.tokens).sum()
    }

    /// Emits the current chunk; returns how many of its last units were handed back
    /// because the whole text counted over the limit. With `carry`, the chunk's end
    /// starts the next one.
    fn close(&mut self, carry: bool) -> usize {
        let mut handed_back = 0;
        let mut text = join(&self.cur);
        while (self.ctx.count)(&text) > self.ctx.max {
            if self.new_units() > 1 {
                self.cur.pop();
                handed_back += 1;
            } else if self.carried > 0 {
                self.cur.remove(0);
                self.carried -= 1;
            } else {
                break;
            }
            text = join(&self.cur);
        }
        let page_starts = page_starts(&self.cur);
        let mut pages: Vec<u32> = page_starts.iter().map(|(page, _)| *page).collect();
        pages.sort_unstable();
        pages.dedup();
        let start_time = self.cur.iter().filter_map(|u| u.start).reduce(f64::min);
        let end_time = match self.cur.last().and_then(|u| u.end) {
            Some(last) => Some(self.cur.iter().filter_map(|u| u.end).fold(last, f64::max)),
            None => None,
        };
        let heading = self.main_section().and_then(|s| self.sections[s].clone());
        self.chunks.push(Chunk {
            index: u32::try_from(self.chunks.len()).unwrap_or(u32::MAX),
            text,
            pages,
            page_starts,
            heading,
            start_time,
            end_time,
        });
        let tail = if carry { self.tail() } else { Vec::new() };
        self.carried = tail.len();
        self.cur = tail;
        handed_back
    }

    /// The section with the most tokens in the current chunk (the first on ties).
    fn main_section(&self) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        let mut totals: Vec<(usize, usize)> = Vec::new();
        for u in &self.cur {
            match totals.iter_mut().find(|(s, _)| *s == u.section) {
                Some((_, t)) => *t += u.tokens.max(1),
                None => totals.push((u.section, u.tokens.max(1))),
            }
        }
        for (s, t) in totals {
            if best.is_none_or(|(_, bt)| t > bt) {
                best = Some((s, t));
            }
        }
        best.map(|(s, _)| s)
    }

    /// The end of the current chunk worth at most `overlap` tokens: whole units, then the
    /// last sentences (or words) of the unit before them.
    fn tail(&self) -> Vec<Unit> {
        let mut budget = self.overlap;
        let mut tail: Vec<Unit> = Vec::new();
        for unit in self.cur.iter().rev() {
            if budget == 0 {
                break;
            }
            if unit.tokens <= budget {
                budget -= unit.tokens;
                tail.push(unit.clone());
                continue;
            }
            if let Some(part) = self.suffix(unit, budget) {
                tail.push(part);
            }
            break;
        }
        tail.reverse();
        tail
    }

    /// The longest run of last sentences (lines first for structured text), else last
    /// words, of `unit` within `budget`.
    fn suffix(&self, unit: &Unit, budget: usize) -> Option<Unit> {
        let levels: &[Level] = if self.ctx.lines_first {
            &[Level::Lines, Level::Sentences, Level::Words]
        } else {
            &[Level::Sentences, Level::Words]
        };
        for level in levels {
            let pieces = pieces(&unit.text, *level);
            let mut start = pieces.len();
            let mut used = 0;
            while start > 0 {
                let t = (self.ctx.count)(pieces[start - 1].1);
                if used + t > budget {
                    break;
                }
                used += t;
                start -= 1;
            }
            while start < pieces.len() {
                let text = join_pieces(&pieces[start..]);
                let tokens = (self.ctx.count)(&text);
                if tokens <= budget {
                    return Some(Unit {
                        text,
                        tokens,
                        ..unit.clone()
                    });
                }
                start += 1;
            }
        }
        None
    }
}

fn join(units: &[Unit]) -> String {
    let mut text = String::new();
    for (i, u) in units.iter().enumerate() {
        if i > 0 {
            text.push_str(u.sep.as_str());
        }
        text.push_str(&u.text);
    }
    text
}

/// Where each page's units start in `join(units)`.
fn page_starts(units: &[Unit]) -> Vec<(u32, usize)> {
    let mut out: Vec<(u32, usize)> = Vec::new();
    let mut at = 0;
    for (i, u) in units.iter().enumerate() {
        if i > 0 {
            at += u.sep.as_str().len();
        }
        if out.last().is_none_or(|(page, _)| *page != u.page) {
            out.push((u.page, at));
        }
        at += u.text.len();
    }
    out
}

fn join_pieces(pieces: &[(Sep, &str)]) -> String {
    let mut text = String::new();
    for (i, (sep, piece)) in pieces.iter().enumerate() {
        if i > 0 {
            text.push_str(sep.as_str());
        }
        text.push_str(piece);
    }
    text
}
