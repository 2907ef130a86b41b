//! Each parser on a small real file.

use docchat_parsers::{DocumentKind, detect, parse};

use crate::{blocks, fixtures, page_texts};

#[test]
fn plain_text_paragraphs_and_form_feed_pages() {
    let doc = parse(
        "notes.txt",
        b"First paragraph\nwraps here.\n\nSecond one.\x0cPage two text.\n",
    )
    .unwrap();
    assert_eq!(doc.kind, DocumentKind::Text);
    assert_eq!(doc.page_count, 2);
    assert_eq!(
        blocks(&doc),
        vec![
            (1, None, "First paragraph\nwraps here."),
            (1, None, "Second one."),
            (2, None, "Page two text."),
        ]
    );
    assert!(doc.segments.is_empty());
}

#[test]
fn markdown_headings_become_paths() {
    let md = "---\ntitle: Guide\n---\n# Intro\n\nWelcome *all*.\n\n## Setup\n\n- install `tool`\n- run it\n\n```sh\ncargo build\n  --release\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n# Next\n\nDone.\n";
    let doc = parse("guide.md", md.as_bytes()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Markdown);
    assert_eq!(doc.title.as_deref(), Some("Guide"));
    assert_eq!(
        blocks(&doc),
        vec![
            (1, Some("Intro"), "Intro"),
            (1, Some("Intro"), "Welcome all."),
            (1, Some("Intro > Setup"), "Setup"),
            (1, Some("Intro > Setup"), "- install tool"),
            (1, Some("Intro > Setup"), "- run it"),
            (1, Some("Intro > Setup"), "cargo build\n  --release"),
            (1, Some("Intro > Setup"), "a | b"),
            (1, Some("Intro > Setup"), "1 | 2"),
            (1, Some("Next"), "Next"),
            (1, Some("Next"), "Done."),
        ]
    );
}

#[test]
fn markdown_title_falls_back_to_first_heading() {
    let doc = parse("x.markdown", b"Intro text\n\n# Real Title\n\nBody").unwrap();
    assert_eq!(doc.title.as_deref(), Some("Real Title"));
    assert_eq!(blocks(&doc)[0], (1, None, "Intro text"));
}

#[test]
fn html_drops_scripts_styles_and_hidden_content() {
    let html = r#"<!DOCTYPE html><html><head><title> My  Page </title>
<style>body { color: red }</style><script>var x = "<h1>not a heading</h1>";</script></head>
<body><nav hidden>Skip me</nav>
<h1>Main &amp; Only</h1><p>Hello <b>world</b>,
   how are   you?</p>
<h2>Details</h2><ul><li>one</li><li>two <i>items</i></li></ul>
<ol start="3"><li>third</li></ol>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td><p>1</p></td></tr></table>
<pre>line 1
  line 2</pre>
<p>Line<br>break</p><noscript>enable js</noscript><div aria-hidden="true">invisible</div>
</body></html>"#;
    let doc = parse("page.html", html.as_bytes()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Html);
    assert_eq!(doc.title.as_deref(), Some("My Page"));
    assert_eq!(
        blocks(&doc),
        vec![
            (1, Some("Main & Only"), "Main & Only"),
            (1, Some("Main & Only"), "Hello world, how are you?"),
            (1, Some("Main & Only > Details"), "Details"),
            (1, Some("Main & Only > Details"), "- one"),
            (1, Some("Main & Only > Details"), "- two items"),
            (1, Some("Main & Only > Details"), "3. third"),
            (1, Some("Main & Only > Details"), "k | v"),
            (1, Some("Main & Only > Details"), "a | 1"),
            (1, Some("Main & Only > Details"), "line 1\n  line 2"),
            (1, Some("Main & Only > Details"), "Line\nbreak"),
        ]
    );
    let all = doc.text();
    for dropped in [
        "color",
        "var x",
        "not a heading",
        "Skip me",
        "enable js",
        "invisible",
    ] {
        assert!(
            !all.contains(dropped),
            "{dropped:?} should be dropped: {all}"
        );
    }
}

#[test]
fn pdf_pages_paragraphs_and_title() {
    let bytes = fixtures::pdf(
        Some("Annual Report"),
        &[
            "# Chapter One\nThe first paragraph starts here\nand wraps onto a second line.\n\nA second paragraph (with parentheses).",
            "Page two has one paragraph.",
            "# Chapter Two\nThird page text.",
        ],
    );
    let doc = parse("report.pdf", &bytes).unwrap();
    assert_eq!(doc.kind, DocumentKind::Pdf);
    assert_eq!(doc.page_count, 3);
    assert_eq!(doc.title.as_deref(), Some("Annual Report"));
    assert_eq!(
        page_texts(&doc, 1),
        vec![
            "Chapter One",
            "The first paragraph starts here\nand wraps onto a second line.",
            "A second paragraph (with parentheses).",
        ]
    );
    assert_eq!(page_texts(&doc, 2), vec!["Page two has one paragraph."]);
    assert_eq!(page_texts(&doc, 3), vec!["Chapter Two", "Third page text."]);
    let numbers: Vec<u32> = doc.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![1, 2, 3]);
}

#[test]
fn pdf_spacing_forms_and_blank_pages() {
    let doc = parse("layout.pdf", &fixtures::layout_pdf()).unwrap();
    assert_eq!(doc.page_count, 4);
    assert_eq!(
        page_texts(&doc, 1),
        vec!["Kerned words!\nLeft Right", "Text drawn by a form"]
    );
    assert!(
        page_texts(&doc, 2).is_empty(),
        "the blank page keeps its number"
    );
    assert_eq!(page_texts(&doc, 3), vec!["Last page (with parentheses)"]);
    assert_eq!(page_texts(&doc, 4), vec!["Hi CIDD Hi"]);
    assert_eq!(doc.title, None);
}

#[test]
fn docx_headings_lists_tables_and_page_breaks() {
    let doc = parse("report.docx", &fixtures::docx()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Docx);
    assert_eq!(doc.title.as_deref(), Some("Q3 Report"));
    assert_eq!(doc.page_count, 2);
    assert_eq!(
        blocks(&doc),
        vec![
            (1, Some("Quarterly Report"), "Quarterly Report"),
            (1, Some("Intro"), "Intro"),
            (1, Some("Intro"), "Sales grew strongly in Q3 & Q4."),
            (1, Some("Intro > Setup"), "Setup"),
            (1, Some("Intro > Setup"), "- Install the tool"),
            (1, Some("Intro > Setup"), "Name Value\nsecond line"),
            (1, Some("Intro > Setup"), "Region | Revenue"),
            (1, Some("Intro > Setup"), "North | 120"),
            (1, Some("Intro > Setup"), "Boxed note"),
            (1, Some("Intro > Setup"), "Before the break."),
            (2, Some("Intro > Setup"), "After the break."),
            (2, Some("Outlook"), "Outlook"),
            (2, Some("Outlook"), "Next year looks good."),
        ]
    );
}

#[test]
fn pptx_one_page_per_slide_in_presentation_order() {
    let doc = parse("deck.pptx", &fixtures::pptx()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Pptx);
    assert_eq!(doc.page_count, 2);
    assert_eq!(doc.title.as_deref(), Some("Welcome"));
    assert_eq!(
        blocks(&doc),
        vec![
            (1, Some("Welcome"), "Welcome"),
            (1, Some("Welcome"), "Agenda for today\nQ&A at the end"),
            (1, Some("Welcome"), "Speaker notes: Remember to smile"),
            (2, Some("Pricing"), "Pricing"),
            (2, Some("Pricing"), "Two plans"),
            (2, Some("Pricing"), "Plan | Price"),
            (2, Some("Pricing"), "Pro | 10 USD"),
        ]
    );
    assert!(!doc.text().contains("99"), "slide numbers are dropped");
}

#[test]
fn xlsx_one_page_per_sheet_with_header_value_rows() {
    let doc = parse("sales.xlsx", &fixtures::xlsx()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Xlsx);
    assert_eq!(doc.title.as_deref(), Some("Sales 2024"));
    assert_eq!(doc.page_count, 2);
    assert_eq!(
        blocks(&doc),
        vec![
            (
                1,
                Some("Sales"),
                "Region: North\nRevenue: 1200.5\nDate: 2024-01-01"
            ),
            (1, Some("Sales"), "Region: South\nRevenue: 800"),
            (2, Some("Notes"), "Remarks: Targets met"),
        ]
    );
}

#[test]
fn csv_and_tsv_rows() {
    let csv = "name,city,notes\nAda,London,\"wrote, the first program\"\nAlan,,\n";
    let doc = parse("people.csv", csv.as_bytes()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Csv);
    assert_eq!(doc.page_count, 1);
    assert_eq!(
        blocks(&doc),
        vec![
            (
                1,
                None,
                "name: Ada\ncity: London\nnotes: wrote, the first program"
            ),
            (1, None, "name: Alan"),
        ]
    );
    let tsv = parse("t.tsv", b"a\tb\n1\t2\n").unwrap();
    assert_eq!(blocks(&tsv), vec![(1, None, "a: 1\nb: 2")]);
    let semicolons = parse("s.csv", b"x;y\n3;4\n").unwrap();
    assert_eq!(blocks(&semicolons), vec![(1, None, "x: 3\ny: 4")]);
    let headerless = parse("n.csv", b"1,2\n3,4\n").unwrap();
    assert_eq!(
        blocks(&headerless),
        vec![
            (1, None, "column 1: 1\ncolumn 2: 2"),
            (1, None, "column 1: 3\ncolumn 2: 4"),
        ]
    );
}

#[test]
fn json_pretty_blocks_per_record() {
    let doc = parse(
        "data.json",
        br#"[{"id":1,"name":"a"},{"id":2,"tags":["x"]}]"#,
    )
    .unwrap();
    assert_eq!(doc.kind, DocumentKind::Json);
    assert_eq!(
        blocks(&doc),
        vec![
            (1, None, "{\n  \"id\": 1,\n  \"name\": \"a\"\n}"),
            (1, None, "{\n  \"id\": 2,\n  \"tags\": [\n    \"x\"\n  ]\n}"),
        ]
    );
    let object = parse("o.json", br#"{"title":"T","n":{"a":true}}"#).unwrap();
    let texts: Vec<&str> = blocks(&object).into_iter().map(|b| b.2).collect();
    assert!(texts.contains(&"\"title\": \"T\""), "{texts:?}");
    assert!(texts.contains(&"\"n\": {\n  \"a\": true\n}"), "{texts:?}");
    let lines = parse("l.jsonl", b"{\"a\":1}\n\n{\"a\":2}\n").unwrap();
    assert_eq!(blocks(&lines).len(), 2);
    let lines_as_json = parse("l.json", b"{\"a\":1}\n{\"a\":2}\n").unwrap();
    assert_eq!(blocks(&lines_as_json).len(), 2);
}

#[test]
fn detection_by_extension_and_content() {
    let pdf = fixtures::pdf(None, &["x"]);
    assert_eq!(detect("a.PDF", &pdf).unwrap(), DocumentKind::Pdf);
    assert_eq!(detect("upload", &pdf).unwrap(), DocumentKind::Pdf);
    assert_eq!(
        detect("upload", &fixtures::docx()).unwrap(),
        DocumentKind::Docx
    );
    assert_eq!(
        detect("upload.bin", &fixtures::pptx()).unwrap(),
        DocumentKind::Pptx
    );
    assert_eq!(
        detect("upload", &fixtures::xlsx()).unwrap(),
        DocumentKind::Xlsx
    );
    assert_eq!(
        detect("x", b"WEBVTT\n\n00:01.000 --> 00:02.000\nhi").unwrap(),
        DocumentKind::Transcript
    );
    assert_eq!(
        detect("x", b"1\n00:00:01,000 --> 00:00:02,000\nhi").unwrap(),
        DocumentKind::Transcript
    );
    assert_eq!(
        detect("x", b"<!doctype html><p>x").unwrap(),
        DocumentKind::Html
    );
    assert_eq!(detect("x", b"{\"a\": 1}").unwrap(), DocumentKind::Json);
    assert_eq!(
        detect("x", b"# Title\n\ntext").unwrap(),
        DocumentKind::Markdown
    );
    assert_eq!(detect("x", b"just words").unwrap(), DocumentKind::Text);
    assert_eq!(
        detect("main.rs", b"fn main() {}").unwrap(),
        DocumentKind::Text
    );
    assert_eq!(detect("a.srt", b"").unwrap(), DocumentKind::Transcript);
    // the extension wins over content
    assert_eq!(
        detect("notes.txt", b"{\"a\": 1}").unwrap(),
        DocumentKind::Text
    );
}

#[test]
fn pdf_of_many_pages_keeps_every_page() {
    let pages: Vec<String> = (1..=40)
        .map(|n| format!("# Section {n}\nBody of page {n}.\n\nMore text on page {n}."))
        .collect();
    let refs: Vec<&str> = pages.iter().map(String::as_str).collect();
    let doc = parse("long.pdf", &fixtures::pdf(None, &refs)).unwrap();
    assert_eq!(doc.page_count, 40);
    for n in 1..=40u32 {
        assert_eq!(
            page_texts(&doc, n),
            vec![
                format!("Section {n}"),
                format!("Body of page {n}."),
                format!("More text on page {n}."),
            ]
        );
    }
}
