//! Which pages a search hit cites: a chunk that spans a page break names the page(s) its
//! best-matching part lies on, best first, not every page it touches.
//!
//! The chunker records where each page's part of a chunk's text starts
//! ([`docchat_parsers::Chunk::page_starts`]); the column keeps them as `page:offset` pairs
//! (`"3:0,4:812"`; a chunk of one page keeps none). Each part is scored against the query's
//! content words (lower-cased, lightly stemmed, stopwords dropped), a word weighing more the
//! fewer parts hold it; the parts with a match are cited in score order. When no part
//! matches (a dense-only hit), the pages are cited by how much of the text they hold.

use std::collections::HashSet;

use crate::entities::chunks;

/// The column's form of a chunk's page starts: `page:offset` pairs, comma-separated.
pub fn encode_page_starts(starts: &[(u32, usize)]) -> String {
    starts
        .iter()
        .map(|(page, at)| format!("{page}:{at}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The page starts of a column value; pairs that do not parse are skipped.
pub fn decode_page_starts(value: &str) -> Vec<(u32, usize)> {
    value
        .split(',')
        .filter_map(|pair| {
            let (page, at) = pair.split_once(':')?;
            Some((page.trim().parse().ok()?, at.trim().parse().ok()?))
        })
        .collect()
}

/// Every page of a chunk, in document order (the `pages` column).
pub fn all_pages(chunk: &chunks::Model) -> Vec<u32> {
    chunk
        .pages
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

/// The pages a hit on `chunk` for `query` cites, best first.
pub fn cited(chunk: &chunks::Model, query: &str) -> Vec<u32> {
    let pages = all_pages(chunk);
    let starts = chunk
        .page_starts
        .as_deref()
        .map(decode_page_starts)
        .unwrap_or_default();
    if pages.len() < 2 || starts.len() < 2 {
        return pages;
    }
    let parts = parts(&chunk.text, &starts);
    let ranked = rank_parts(&parts, query);
    let mut out: Vec<u32> = Vec::new();
    for i in ranked {
        if !out.contains(&parts[i].0) {
            out.push(parts[i].0);
        }
    }
    out
}

/// The text of each page's part: (page, text), in text order.
fn parts<'a>(text: &'a str, starts: &[(u32, usize)]) -> Vec<(u32, &'a str)> {
    let mut out = Vec::new();
    for (i, (page, at)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(text.len(), |next| next.1);
        match text.get(*at..end.max(*at)) {
            Some(part) => out.push((*page, part)),
            // offsets from another text (an edited chunk): the page holds it all
            None => return vec![(starts[0].0, text)],
        }
    }
    out
}

/// The indexes of the parts to cite, best first: the parts matching the query by score,
/// or, when none matches, every part by length.
fn rank_parts(parts: &[(u32, &str)], query: &str) -> Vec<usize> {
    let words: Vec<HashSet<String>> = parts.iter().map(|(_, t)| stems(t)).collect();
    let query: HashSet<String> = stems(query);
    let weight = |term: &String| {
        let holding = words.iter().filter(|w| w.contains(term)).count();
        if holding == 0 {
            0.0
        } else {
            (1.0 + parts.len() as f64 / holding as f64).ln()
        }
    };
    let weights: Vec<(f64, String)> = query.into_iter().map(|t| (weight(&t), t)).collect();
    let scores: Vec<f64> = words
        .iter()
        .map(|w| {
            weights
                .iter()
                .filter(|(_, t)| w.contains(t))
                .map(|(weight, _)| weight)
                .sum()
        })
        .collect();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    // longer parts first on equal scores
    order.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then(parts[b].1.len().cmp(&parts[a].1.len()))
            .then(a.cmp(&b))
    });
    if scores[order[0]] > 0.0 {
        order.retain(|&i| scores[i] > 0.0);
    }
    order
}

/// The content words of a text: lower-cased, stemmed, without stopwords.
fn stems(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A light suffix stripper: enough to meet "configure", "configured" and "configuration"
/// halfway, never below a stem of three letters.
fn stem(word: &str) -> String {
    const SUFFIXES: [&str; 14] = [
        "ational", "ations", "ation", "ement", "ments", "ment", "ings", "ing", "ies", "ied", "ed",
        "es", "ly", "s",
    ];
    for suffix in SUFFIXES {
        if let Some(stem) = word.strip_suffix(suffix)
            && stem.chars().count() >= 3
        {
            return stem.trim_end_matches('e').to_owned();
        }
    }
    word.trim_end_matches('e').to_owned()
}

/// English function words, which say nothing about where an answer lies.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had",
    "has", "have", "how", "if", "in", "into", "is", "it", "its", "may", "me", "might", "more",
    "most", "must", "my", "no", "not", "of", "on", "one", "or", "other", "our", "out", "over",
    "shall", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "through", "to", "up", "us", "use", "used", "using",
    "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str, pages: &str, starts: Option<&str>) -> chunks::Model {
        chunks::Model {
            id: 1,
            document_id: "d".into(),
            collection_id: "c".into(),
            chunk_index: 0,
            text: text.into(),
            pages: pages.into(),
            page_starts: starts.map(Into::into),
            heading: None,
            start_time: None,
            end_time: None,
            embedding: Vec::new(),
        }
    }

    #[test]
    fn page_starts_round_trip() {
        let starts = vec![(3, 0), (4, 812)];
        assert_eq!(encode_page_starts(&starts), "3:0,4:812");
        assert_eq!(decode_page_starts("3:0,4:812"), starts);
        assert_eq!(decode_page_starts("3:0,x,4:y"), vec![(3, 0)]);
        assert!(decode_page_starts("").is_empty());
    }

    #[test]
    fn the_matching_part_is_cited_first_and_alone() {
        let text = "The boiler must be drained before winter.\n\nConfiguring the network interface needs root.";
        let at = text.find("Configuring").unwrap();
        let c = chunk(text, "7,8", Some(&format!("7:0,8:{at}")));
        assert_eq!(
            cited(&c, "how do I configure a network interface?"),
            vec![8]
        );
        assert_eq!(cited(&c, "when should the boiler be drained"), vec![7]);
        // both parts match: the better one first
        assert_eq!(cited(&c, "drained boiler and network"), vec![7, 8]);
    }

    #[test]
    fn without_a_match_the_page_holding_most_text_comes_first() {
        let text = "short one.\n\nA much longer second part that holds most of the words.";
        let at = text.find("A much").unwrap();
        let c = chunk(text, "1,2", Some(&format!("1:0,2:{at}")));
        assert_eq!(cited(&c, "zebra"), vec![2, 1]);
    }

    #[test]
    fn single_pages_and_old_rows_cite_every_page() {
        assert_eq!(cited(&chunk("text", "5", Some("5:0")), "text"), vec![5]);
        // rows from before page starts were kept
        assert_eq!(cited(&chunk("a\n\nb", "1,2", None), "b"), vec![1, 2]);
        // offsets that do not fit the text
        assert_eq!(cited(&chunk("ab", "1,2", Some("1:0,2:99")), "ab"), vec![1]);
    }

    #[test]
    fn stems_meet_halfway() {
        assert_eq!(stem("configured"), stem("configure"));
        assert_eq!(stem("configuration"), stem("configure"));
        assert_eq!(stem("drains"), stem("drained"));
        assert_eq!(stem("is"), "is");
    }
}
