//! Bad input: clear errors, never a panic.

use docchat_parsers::{DocumentKind, ParseError, detect, is_media, parse, parse_as};

use crate::fixtures;

fn message(result: Result<docchat_parsers::ParsedDocument, ParseError>) -> (ParseError, String) {
    let err = result.expect_err("expected an error");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one-line message: {msg:?}");
    (err, msg)
}

#[test]
fn unsupported_types() {
    let (err, msg) = message(parse("setup.exe", b"MZ\x90\x00\x03"));
    assert!(matches!(err, ParseError::Unsupported(_)));
    assert!(msg.starts_with("unsupported file type .exe"), "{msg}");

    let (err, msg) = message(parse("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest"));
    assert!(matches!(err, ParseError::Unsupported(_)));
    assert!(msg.contains(".docx"), "{msg}");

    let (err, msg) = message(parse("song.mp3", b"ID3\x04\x00"));
    assert!(matches!(err, ParseError::Unsupported(_)));
    assert!(msg.contains("transcribed"), "{msg}");
    assert!(is_media("song.mp3") && is_media("clip.MOV") && is_media("x.webm"));
    assert!(!is_media("doc.pdf") && !is_media("noext"));

    let (err, _) = message(parse("blob", &[0u8, 1, 2, 3, 255, 254, 0, 7]));
    assert!(matches!(err, ParseError::Unsupported(_)));

    // a zip that is no Office file
    let other_zip = fixtures::zip_parts(&[("readme.txt", "hello")]);
    assert!(matches!(
        detect("archive", &other_zip),
        Err(ParseError::Unsupported(_))
    ));
}

#[test]
fn empty_files() {
    for name in ["a.txt", "a.pdf", "a.docx", "a.csv", "a.vtt", "noext"] {
        let (err, msg) = message(parse(name, b""));
        assert_eq!(err, ParseError::Empty, "{name}");
        assert!(msg.starts_with("no text found"), "{msg}");
    }
    assert_eq!(
        parse("blank.txt", b"  \n\n \t\n").unwrap_err(),
        ParseError::Empty
    );
    assert_eq!(parse("blank.md", b"#\n\n").unwrap_err(), ParseError::Empty);
    assert_eq!(
        parse("blank.csv", b",,\n,,\n").unwrap_err(),
        ParseError::Empty
    );
    // a PDF whose pages have no text layer
    let bytes = fixtures::pdf(None, &[""]);
    assert_eq!(parse("scan.pdf", &bytes).unwrap_err(), ParseError::Empty);
    // an empty .exe is still unsupported
    assert!(matches!(
        parse("x.exe", b""),
        Err(ParseError::Unsupported(_))
    ));
}

#[test]
fn garbage_pdf() {
    let (err, msg) = message(parse("fake.pdf", b"this is not a pdf at all"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert_eq!(
        msg,
        "corrupt PDF: missing %PDF header (this is not a PDF file)"
    );

    let (err, msg) = message(parse(
        "broken.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog garbage",
    ));
    assert!(matches!(err, ParseError::Corrupt(_)), "{err:?}");
    assert!(msg.starts_with("corrupt PDF: "), "{msg}");
}

#[test]
fn password_protected_pdf() {
    let locked = fixtures::encrypted_pdf("secret", &["Hidden text"]);
    let (err, msg) = message(parse("locked.pdf", &locked));
    assert_eq!(err, ParseError::Encrypted("PDF".into()));
    assert_eq!(
        msg,
        "PDF is password-protected; remove the password and upload it again"
    );
    // encrypted with an empty user password: readable without asking
    let open = fixtures::encrypted_pdf("", &["Readable text"]);
    let doc = parse("open.pdf", &open).unwrap();
    assert_eq!(doc.pages[0].blocks[0].text, "Readable text");
}

#[test]
fn truncated_office_files() {
    for (name, bytes) in [
        ("t.docx", fixtures::docx()),
        ("t.pptx", fixtures::pptx()),
        ("t.xlsx", fixtures::xlsx()),
    ] {
        let cut = &bytes[..bytes.len() / 2];
        let (err, msg) = message(parse(name, cut));
        assert!(matches!(err, ParseError::Corrupt(_)), "{name}: {err:?}");
        assert!(msg.starts_with("corrupt "), "{msg}");
        assert!(msg.contains("truncated"), "{msg}");
    }
    let (err, _) = message(parse("x.docx", b"PK\x03\x04garbage"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    let (err, msg) = message(parse("x.docx", b"plain text, not a zip"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(msg.starts_with("corrupt Word document: "), "{msg}");
    // password-protected Office files are OLE compound files
    let (err, msg) = message(parse(
        "secret.xlsx",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest",
    ));
    assert_eq!(err, ParseError::Encrypted("Excel workbook".into()));
    assert!(msg.contains("password-protected"), "{msg}");
    // a zip without the main part
    let missing = fixtures::zip_parts(&[("word/other.xml", "<x/>")]);
    let (err, msg) = message(parse("m.docx", &missing));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(msg.contains("word/document.xml"), "{msg}");
}

#[test]
fn malformed_xml_inside_a_package() {
    let bytes = fixtures::zip_parts(&[(
        "word/document.xml",
        "<w:document xmlns:w=\"x\"><w:body><w:p><w:r><w:t>ok</w:t></w:p></w:body>",
    )]);
    let (err, msg) = message(parse("bad.docx", &bytes));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(msg.contains("malformed XML in word/document.xml"), "{msg}");
}

#[test]
fn invalid_text() {
    let (err, msg) = message(parse("a.txt", b"hello \x00\x01\x02\xff\xfe\x03 world"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(msg.contains("not valid UTF-8"), "{msg}");
    // legacy 8-bit text is read as Windows-1252
    let doc = parse("latin.txt", b"na\xefve caf\xe9").unwrap();
    assert_eq!(doc.pages[0].blocks[0].text, "naïve café");
    let (err, _) = message(parse("bad.json", b"{\"a\": 1,"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(err.to_string().starts_with("corrupt JSON file: "));
    let (err, msg) = message(parse("bad.vtt", b"WEBVTT\n\nno timings here\n"));
    assert!(matches!(err, ParseError::Corrupt(_)));
    assert!(msg.contains("-->"), "{msg}");
    let (err, _) = message(parse("bad.csv", b"\x00\x00\x00\x01"));
    assert!(matches!(err, ParseError::Corrupt(_)));
}

/// Every parser on truncated, bit-flipped and random versions of real files returns
/// (and never panics).
#[test]
fn mangled_inputs_never_panic() {
    let samples: Vec<(DocumentKind, &str, Vec<u8>)> = vec![
        (
            DocumentKind::Pdf,
            "a.pdf",
            fixtures::pdf(Some("t"), &["# H\nsome text\n\nmore"]),
        ),
        (DocumentKind::Pdf, "b.pdf", fixtures::layout_pdf()),
        (DocumentKind::Docx, "a.docx", fixtures::docx()),
        (DocumentKind::Pptx, "a.pptx", fixtures::pptx()),
        (DocumentKind::Xlsx, "a.xlsx", fixtures::xlsx()),
        (
            DocumentKind::Html,
            "a.html",
            b"<html><h1>x</h1><p>y &amp; z</p><table><tr><td>1".to_vec(),
        ),
        (
            DocumentKind::Markdown,
            "a.md",
            b"# x\n\n- a\n  - b\n\n```\ncode".to_vec(),
        ),
        (DocumentKind::Csv, "a.csv", b"a,b\n\"1,2\n3".to_vec()),
        (
            DocumentKind::Json,
            "a.json",
            b"[{\"a\": [1, 2, {\"b\": null}]}]".to_vec(),
        ),
        (
            DocumentKind::Transcript,
            "a.vtt",
            b"WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>hi</v>".to_vec(),
        ),
        (
            DocumentKind::Transcript,
            "a.srt",
            b"1\n00:00:01,000 --> 00:00:02,000\nA: hi\n".to_vec(),
        ),
    ];
    let mut state = 0x2545_f491_u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    for (kind, name, bytes) in &samples {
        let len = bytes.len();
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for i in 1..24 {
            variants.push(bytes[..len * i / 24].to_vec());
        }
        for _ in 0..40 {
            let mut flipped = bytes.clone();
            for _ in 0..1 + next() % 8 {
                let at = next() as usize % len;
                flipped[at] ^= 1 << (next() % 8);
            }
            variants.push(flipped);
        }
        for size in [1usize, 7, 100, 5000] {
            variants.push((0..size).map(|_| next() as u8).collect());
        }
        for variant in &variants {
            // either result is fine; returning at all is the point
            let _ = parse(name, variant);
            let _ = parse_as(*kind, name, variant);
        }
    }
}
