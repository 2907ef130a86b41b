//! The chunker: token limits, overlap, pages, headings, transcripts, determinism.

use docchat_parsers::{
    AudioSegment, Block, Chunk, ChunkOptions, DocumentKind, Page, ParsedDocument, chunk, parse,
    segments_to_document,
};

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

fn block(heading: Option<&str>, text: &str) -> Block {
    Block {
        heading: heading.map(Into::into),
        text: text.into(),
    }
}

fn doc(pages: Vec<Vec<Block>>) -> ParsedDocument {
    ParsedDocument {
        kind: DocumentKind::Text,
        page_count: pages.len() as u32,
        pages: pages
            .into_iter()
            .enumerate()
            .map(|(i, blocks)| Page {
                number: i as u32 + 1,
                blocks,
            })
            .collect(),
        title: None,
        segments: Vec::new(),
        scanned: Vec::new(),
        page_sizes: Vec::new(),
    }
}

/// `n` numbered sentences of five words: "S{k}a s{k}b s{k}c s{k}d end{k}."
fn sentences(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|k| format!("S{k}a s{k}b s{k}c s{k}d end{k}."))
        .collect::<Vec<_>>()
        .join(" ")
}

fn opts(max_tokens: usize, overlap_tokens: usize) -> ChunkOptions {
    ChunkOptions {
        max_tokens,
        overlap_tokens,
    }
}

fn assert_within(chunks: &[Chunk], max: usize, count: &dyn Fn(&str) -> usize) {
    assert!(!chunks.is_empty());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.index, i as u32);
        assert!(
            count(&c.text) <= max,
            "chunk {i} has {} > {max}: {:?}",
            count(&c.text),
            c.text
        );
        assert!(!c.text.trim().is_empty());
        let mut sorted = c.pages.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(c.pages, sorted);
    }
}

#[test]
fn max_tokens_is_respected_and_sentences_stay_whole() {
    // one long paragraph of 60 sentences (300 words)
    let d = doc(vec![vec![block(None, &sentences(0, 60))]]);
    let chunks = chunk(&d, &opts(52, 0), &words);
    assert_within(&chunks, 52, &words);
    // 10 whole sentences fit in 52 tokens, so chunks are 50 words and end on a sentence
    assert_eq!(chunks.len(), 6);
    for c in &chunks {
        assert_eq!(words(&c.text), 50);
        assert!(c.text.ends_with('.'), "{:?}", c.text);
    }
    // without overlap, the chunks put back together are the text
    let joined: Vec<&str> = chunks
        .iter()
        .flat_map(|c| c.text.split_whitespace())
        .collect();
    assert_eq!(joined.join(" "), sentences(0, 60));
}

#[test]
fn overlap_repeats_the_previous_tail() {
    let d = doc(vec![vec![block(None, &sentences(0, 40))]]);
    let chunks = chunk(&d, &opts(30, 10), &words);
    assert_within(&chunks, 30, &words);
    assert!(chunks.len() >= 8, "{}", chunks.len());
    for pair in chunks.windows(2) {
        let prev: Vec<&str> = pair[0].text.split_whitespace().collect();
        let next: Vec<&str> = pair[1].text.split_whitespace().collect();
        // the last two sentences (10 words) open the next chunk
        assert_eq!(
            &next[..10],
            &prev[prev.len() - 10..],
            "{:?} / {:?}",
            pair[0].text,
            pair[1].text
        );
        assert!(next.len() > 10, "each chunk brings new text");
    }
    // all text is covered, in order
    let last = chunks.last().unwrap();
    assert!(last.text.ends_with("end39."));
    assert!(chunks[0].text.starts_with("S0a"));
}

#[test]
fn overlap_falls_back_to_words_for_long_sentences() {
    let text: String = (0..100)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let d = doc(vec![vec![block(None, &text)]]);
    let chunks = chunk(&d, &opts(20, 5), &words);
    assert_within(&chunks, 20, &words);
    for pair in chunks.windows(2) {
        let prev: Vec<&str> = pair[0].text.split_whitespace().collect();
        let next: Vec<&str> = pair[1].text.split_whitespace().collect();
        assert_eq!(&next[..5], &prev[prev.len() - 5..]);
    }
    assert!(chunks.last().unwrap().text.ends_with("w99"));
}

#[test]
fn pages_are_tracked_across_page_boundaries() {
    let d = doc(vec![
        vec![block(None, &sentences(0, 3))],
        vec![block(None, &sentences(3, 3))],
        vec![block(None, &sentences(6, 3))],
    ]);
    let chunks = chunk(&d, &opts(20, 0), &words);
    assert_within(&chunks, 20, &words);
    let pages: Vec<Vec<u32>> = chunks.iter().map(|c| c.pages.clone()).collect();
    // 15 words per page, 20 per chunk: paragraphs (pages) are kept whole when they fit
    assert_eq!(pages, vec![vec![1], vec![2], vec![3]]);

    // a page ends its chunk even where the next page would fit (15 new words >= 40 / 4)
    let chunks = chunk(&d, &opts(40, 0), &words);
    let pages: Vec<Vec<u32>> = chunks.iter().map(|c| c.pages.clone()).collect();
    assert_eq!(pages, vec![vec![1], vec![2], vec![3]]);
    assert_eq!(chunks[0].text, sentences(0, 3));
    assert_eq!(chunks[1].page_starts, vec![(2, 0)]);

    // overlap does not carry page 2's tail into the chunk of page 3
    let chunks = chunk(&d, &opts(20, 5), &words);
    assert_within(&chunks, 20, &words);
    assert!(chunks.iter().all(|c| c.pages.len() == 1), "{chunks:#?}");
    assert!(
        chunks.iter().any(|c| c.text.starts_with("S6a")),
        "{chunks:#?}"
    );

    // a page holding less than the minimum (5 words < 40 / 4) joins the next one
    let d = doc(vec![
        vec![block(None, &sentences(0, 1))],
        vec![block(None, &sentences(1, 3))],
    ]);
    let chunks = chunk(&d, &opts(40, 0), &words);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].pages, vec![1, 2]);
    assert_eq!(
        chunks[0].text,
        format!("{}\n\n{}", sentences(0, 1), sentences(1, 3))
    );
    // where each page's part of the text starts
    assert_eq!(
        chunks[0].page_starts,
        vec![(1, 0), (2, sentences(0, 1).len() + 2)]
    );
    for c in &chunks {
        for (page, at) in &c.page_starts {
            assert!(c.pages.contains(page) && c.text.is_char_boundary(*at));
        }
    }
}

#[test]
fn headings_are_kept_and_sections_do_not_bleed() {
    let d = doc(vec![
        vec![
            block(Some("Intro"), "Intro"),
            block(Some("Intro"), &sentences(0, 6)),
            block(Some("Intro > Setup"), "Setup"),
            block(Some("Intro > Setup"), &sentences(6, 6)),
        ],
        vec![
            block(Some("Usage"), "Usage"),
            block(Some("Usage"), &sentences(12, 2)),
        ],
    ]);
    let chunks = chunk(&d, &opts(40, 5), &words);
    assert_within(&chunks, 40, &words);
    let summary: Vec<(Option<&str>, Vec<u32>)> = chunks
        .iter()
        .map(|c| (c.heading.as_deref(), c.pages.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (Some("Intro"), vec![1]),
            (Some("Intro > Setup"), vec![1]),
            (Some("Usage"), vec![2]),
        ]
    );
    assert!(chunks[0].text.starts_with("Intro\n\nS0a"));
    assert!(
        chunks[1].text.starts_with("Setup\n\nS6a"),
        "no overlap across sections"
    );
    assert!(chunks[2].text.starts_with("Usage"));

    // a section too small to stand alone joins the next one
    let d = doc(vec![vec![
        block(Some("A"), "A"),
        block(Some("A > B"), "B"),
        block(Some("A > B"), &sentences(0, 6)),
    ]]);
    let chunks = chunk(&d, &opts(40, 0), &words);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].heading.as_deref(), Some("A > B"));
    assert!(chunks[0].text.starts_with("A\n\nB\n\n"));
}

#[test]
fn overlong_words_are_cut_by_tokens() {
    let chars = |s: &str| s.chars().count();
    let blob = "x".repeat(95);
    let d = doc(vec![vec![block(None, &format!("short words {blob} tail"))]]);
    let chunks = chunk(&d, &opts(30, 0), &chars);
    assert_within(&chunks, 30, &chars);
    let total: usize = chunks.iter().map(|c| c.text.matches('x').count()).sum();
    assert_eq!(total, 95, "{chunks:#?}");
}

#[test]
fn a_counter_with_special_tokens_is_still_respected() {
    // counts 2 extra tokens per call, like [CLS] and [SEP]
    let with_specials = |s: &str| s.split_whitespace().count() + 2;
    let d = doc(vec![vec![
        block(None, &sentences(0, 10)),
        block(None, &sentences(10, 10)),
    ]]);
    let chunks = chunk(&d, &opts(25, 4), &with_specials);
    assert_within(&chunks, 25, &with_specials);
}

#[test]
fn output_is_deterministic() {
    let bytes = crate::fixtures::pdf(
        None,
        &[
            &format!("{}\n\n{}", sentences(0, 20), sentences(20, 5)),
            &sentences(25, 30),
        ],
    );
    let parsed = parse("d.pdf", &bytes).unwrap();
    let a = chunk(&parsed, &opts(64, 16), &words);
    let b = chunk(&parse("d.pdf", &bytes).unwrap(), &opts(64, 16), &words);
    assert_eq!(a, b);
    assert_within(&a, 64, &words);
    assert!(a.iter().any(|c| c.pages == vec![1]) && a.iter().any(|c| c.pages == vec![2]));
}

#[test]
fn transcripts_carry_times() {
    let seg = |start: f64, end: Option<f64>, speaker: &str, text: &str| AudioSegment {
        start,
        end,
        speaker: speaker.into(),
        original_speaker: (!speaker.is_empty()).then(|| speaker.into()),
        text: text.into(),
    };
    let d = segments_to_document(vec![
        seg(0.0, Some(5.0), "Ann", "one two three four five six"),
        seg(5.0, Some(9.0), "Bob", "seven eight nine ten"),
        seg(9.0, Some(12.0), "Ann", "eleven twelve thirteen"),
        seg(12.0, None, "", "fourteen fifteen"),
    ]);
    let chunks = chunk(&d, &opts(12, 0), &words);
    assert_within(&chunks, 12, &words);
    type Summary<'a> = (&'a str, Option<f64>, Option<f64>, Vec<u32>);
    let summary: Vec<Summary<'_>> = chunks
        .iter()
        .map(|c| (c.text.as_str(), c.start_time, c.end_time, c.pages.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "Ann: one two three four five six\nBob: seven eight nine ten",
                Some(0.0),
                Some(9.0),
                vec![1]
            ),
            (
                "Ann: eleven twelve thirteen\nfourteen fifteen",
                Some(9.0),
                None,
                vec![1]
            ),
        ]
    );
    assert!(chunks.iter().all(|c| c.heading.is_none()));

    // the overlap keeps the times of the segment it comes from
    let chunks = chunk(&d, &opts(12, 4), &words);
    assert_within(&chunks, 12, &words);
    assert_eq!(chunks[1].start_time, Some(5.0));
    assert!(
        chunks[1]
            .text
            .starts_with("seven eight nine ten\nAnn: eleven"),
        "{:?}",
        chunks[1].text
    );
}

#[test]
fn empty_documents_have_no_chunks() {
    let d = doc(vec![vec![]]);
    assert!(chunk(&d, &opts(10, 2), &words).is_empty());
}

#[test]
fn structured_text_is_cut_at_line_ends() {
    let fields: Vec<String> = (0..60)
        .map(|i| format!("\"key{i}\": \"value number {i}. more words\""))
        .collect();
    let json = format!("[{{{}}}, {{\"small\": 1}}]", fields.join(","));
    let doc = parse("big.json", json.as_bytes()).unwrap();
    let pretty = &doc.pages[0].blocks[0].text;
    let chunks = chunk(&doc, &opts(40, 0), &words);
    assert_within(&chunks, 40, &words);
    let lines: Vec<&str> = pretty.lines().collect();
    for c in &chunks[..chunks.len() - 1] {
        for line in c.text.lines() {
            assert!(lines.contains(&line), "{line:?} is not a whole line");
        }
    }
    assert_eq!(chunks.last().unwrap().text, "{\n  \"small\": 1\n}");
}
