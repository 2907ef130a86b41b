//! A document's text read back by page, in bounded slices with a continuation (an MCP
//! client's `get_document` and document resources, issue 41).
//!
//! Ingestion stores each page's parsed text (`document_pages`). A document ingested before
//! those rows existed has its text rebuilt from its chunks: in chunk order, each chunk's
//! overlap with the one before dropped, its parts given to the pages its `page_starts`
//! name. That rebuild is close to the parsed text, not byte for byte (separators between
//! chunks are normalized to a blank line).

use std::collections::BTreeMap;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::documents;
use crate::entities::{chunks, document_pages, documents as doc_rows};
use crate::pages::{all_pages, decode_page_starts};

/// The most characters one slice may hold.
pub const MAX_SLICE_CHARS: u32 = 200_000;
/// The most page numbers one read may name (each is a bound parameter).
pub const MAX_PAGES: usize = 1000;
/// Pages read from the database per query while a slice fills.
const PAGES_PER_QUERY: u64 = 32;

/// Where a slice starts: a page and a character offset into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    pub page: u32,
    pub char: u64,
}

/// Part of one page's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePart {
    pub page: u32,
    /// Where `text` starts in the page (characters); 0 for a whole page or its beginning.
    pub start_char: u64,
    pub text: String,
}

/// What one read returns.
#[derive(Debug)]
pub struct Slice {
    pub document: doc_rows::Model,
    pub parts: Vec<PagePart>,
    /// Where the next read continues; `None` when the selection was read to its end.
    pub next: Option<Position>,
}

/// Reads up to `max_chars` (at most [`MAX_SLICE_CHARS`]) of a document the caller may read,
/// from `from` on, restricted to `pages` when not empty. A document the caller cannot read
/// is the same 404 as one that does not exist.
pub async fn read(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    pages: &[u32],
    from: Position,
    max_chars: u32,
) -> ApiResult<Slice> {
    if pages.len() > MAX_PAGES {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_PAGES} pages at a time"
        )));
    }
    let document = documents::get(db, caller, id).await?;
    let budget = u64::from(if max_chars == 0 {
        MAX_SLICE_CHARS
    } else {
        max_chars.min(MAX_SLICE_CHARS)
    });
    let stored = document_pages::Entity::find()
        .filter(document_pages::Column::DocumentId.eq(id))
        .select_only()
        .column(document_pages::Column::Page)
        .limit(1)
        .into_tuple::<i32>()
        .one(db)
        .await?
        .is_some();
    let mut filler = Filler::new(budget, from);
    if stored {
        let mut after = i32::try_from(from.page).unwrap_or(i32::MAX) - 1;
        loop {
            let mut query = document_pages::Entity::find()
                .filter(document_pages::Column::DocumentId.eq(id))
                .filter(document_pages::Column::Page.gt(after))
                .order_by_asc(document_pages::Column::Page)
                .limit(PAGES_PER_QUERY);
            if !pages.is_empty() {
                query = query.filter(document_pages::Column::Page.is_in(pages.iter().copied()));
            }
            let rows = query.all(db).await?;
            let Some(last) = rows.last().map(|r| r.page) else {
                break;
            };
            for row in rows {
                if !filler.push(u32::try_from(row.page).unwrap_or(0), &row.text) {
                    return Ok(filler.done(document));
                }
            }
            after = last;
        }
    } else {
        let rows = chunks::Entity::find()
            .filter(chunks::Column::DocumentId.eq(id))
            .order_by_asc(chunks::Column::ChunkIndex)
            .all(db)
            .await?;
        for (page, text) in rebuild(&rows) {
            if page < from.page || (!pages.is_empty() && !pages.contains(&page)) {
                continue;
            }
            if !filler.push(page, &text) {
                return Ok(filler.done(document));
            }
        }
    }
    Ok(filler.done(document))
}

/// Collects page parts in order until the budget is spent.
struct Filler {
    left: u64,
    from: Position,
    parts: Vec<PagePart>,
    next: Option<Position>,
}

impl Filler {
    fn new(budget: u64, from: Position) -> Filler {
        Filler {
            left: budget,
            from,
            parts: Vec::new(),
            next: None,
        }
    }

    /// Takes what fits of `page`; false once the slice is full (the continuation is set).
    fn push(&mut self, page: u32, text: &str) -> bool {
        if self.left == 0 {
            self.next = Some(Position { page, char: 0 });
            return false;
        }
        let start = if page == self.from.page {
            self.from.char
        } else {
            0
        };
        let rest = skip_chars(text, start);
        if rest.is_empty() && start > 0 {
            return true;
        }
        let (taken, cut) = take_chars(rest, self.left);
        let count = taken.chars().count() as u64;
        self.left -= count;
        self.parts.push(PagePart {
            page,
            start_char: start,
            text: taken.to_owned(),
        });
        if cut {
            self.next = Some(Position {
                page,
                char: start + count,
            });
            return false;
        }
        true
    }

    fn done(self, document: doc_rows::Model) -> Slice {
        Slice {
            document,
            parts: self.parts,
            next: self.next,
        }
    }
}

/// `text` from its `n`th character on.
fn skip_chars(text: &str, n: u64) -> &str {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    match text.char_indices().nth(n) {
        Some((at, _)) => &text[at..],
        None => "",
    }
}

/// At most `n` characters of `text`, and whether it was cut.
fn take_chars(text: &str, n: u64) -> (&str, bool) {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    match text.char_indices().nth(n) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

/// The pages' text of a document known only by its chunks (in chunk order): page → text.
fn rebuild(rows: &[chunks::Model]) -> BTreeMap<u32, String> {
    let mut out: BTreeMap<u32, String> = BTreeMap::new();
    let mut previous: &str = "";
    for chunk in rows {
        let text = chunk.text.as_str();
        let skip = overlap(previous, text);
        previous = text;
        let pages = all_pages(chunk);
        let starts = chunk
            .page_starts
            .as_deref()
            .map(decode_page_starts)
            .filter(|s| s.len() > 1)
            .unwrap_or_else(|| vec![(pages.first().copied().unwrap_or(1), 0)]);
        for (i, (page, at)) in starts.iter().enumerate() {
            let end = starts.get(i + 1).map_or(text.len(), |next| next.1);
            let begin = (*at).max(skip);
            let Some(part) = text.get(begin..end.max(begin)) else {
                continue;
            };
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let page_text = out.entry(*page).or_default();
            if !page_text.is_empty() {
                page_text.push_str("\n\n");
            }
            page_text.push_str(part);
        }
    }
    out
}

/// The length (bytes) of the longest end of `before` that `after` starts with: the text a
/// chunk repeats from the one before it (the chunker carries at most a few dozen tokens).
fn overlap(before: &str, after: &str) -> usize {
    const LONGEST: usize = 1024;
    let longest = before.len().min(after.len()).min(LONGEST);
    (1..=longest)
        .rev()
        .find(|&n| {
            before.is_char_boundary(before.len() - n)
                && after.is_char_boundary(n)
                && before[before.len() - n..] == after[..n]
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(index: i32, text: &str, pages: &str, starts: Option<&str>) -> chunks::Model {
        chunks::Model {
            id: i64::from(index),
            document_id: "d".into(),
            collection_id: "c".into(),
            chunk_index: index,
            text: text.into(),
            pages: pages.into(),
            page_starts: starts.map(str::to_owned),
            heading: None,
            start_time: None,
            end_time: None,
            embedding: Vec::new(),
        }
    }

    #[test]
    fn a_slice_stops_at_its_budget_and_continues_where_it_stopped() {
        let mut f = Filler::new(5, Position { page: 1, char: 0 });
        assert!(f.push(1, "abc"));
        assert!(!f.push(2, "défgh"));
        assert_eq!(f.next, Some(Position { page: 2, char: 2 }));
        assert_eq!(f.parts[1].text, "dé");
        let mut g = Filler::new(100, f.next.unwrap_or_default());
        assert!(g.push(2, "défgh"));
        assert_eq!(
            g.parts,
            vec![PagePart {
                page: 2,
                start_char: 2,
                text: "fgh".into()
            }]
        );
        // A budget spent exactly at a page's end continues at the next page.
        let mut h = Filler::new(3, Position::default());
        assert!(h.push(1, "abc"));
        assert!(!h.push(2, "x"));
        assert_eq!(h.next, Some(Position { page: 2, char: 0 }));
    }

    #[test]
    fn legacy_text_is_rebuilt_from_chunks_without_their_overlap() {
        let rows = vec![
            chunk(0, "One two. Three four.", "1", None),
            chunk(
                1,
                "Three four. Five six.\n\nSeven.",
                "1,2",
                Some("1:0,2:23"),
            ),
            chunk(2, "Eight nine.", "3", None),
        ];
        let pages = rebuild(&rows);
        assert_eq!(pages[&1], "One two. Three four.\n\nFive six.");
        assert_eq!(pages[&2], "Seven.");
        assert_eq!(pages[&3], "Eight nine.");
        assert_eq!(overlap("abc", "xyz"), 0);
        assert_eq!(overlap("héllo wörld", "wörld!"), "wörld".len());
    }
}
