//! WebVTT and SRT transcripts, and documents from transcription results.

use docchat_parsers::{AudioSegment, DocumentKind, parse, segments_to_document};

fn seg(
    start: f64,
    end: Option<f64>,
    speaker: &str,
    original: Option<&str>,
    text: &str,
) -> AudioSegment {
    AudioSegment {
        start,
        end,
        speaker: speaker.into(),
        original_speaker: original.map(Into::into),
        text: text.into(),
    }
}

#[test]
fn webvtt_voice_tags() {
    let vtt = "WEBVTT - interview\nKind: captions\n\nNOTE this is a comment\nwith --> an arrow-less line\n\nSTYLE\n::cue { color: red }\n\nintro\n00:00:01.000 --> 00:00:04.500 align:start position:10%\n<v Roger Bingham>We are in New York City\n\n00:00:04.500 --> 00:00:06.000\n<v.loud SPEAKER_02>Hi &amp; <i>welcome</i></v>\n<v Roger Bingham>Thanks</v>\n\n01:00.000 --> 01:02.250\nNo speaker here,\nsplit over <c.yellow>two</c> lines.\n";
    let doc = parse("talk.vtt", vtt.as_bytes()).unwrap();
    assert_eq!(doc.kind, DocumentKind::Transcript);
    assert_eq!(doc.page_count, 1);
    assert_eq!(
        doc.segments,
        vec![
            seg(
                1.0,
                Some(4.5),
                "Roger Bingham",
                Some("Roger Bingham"),
                "We are in New York City"
            ),
            seg(
                4.5,
                Some(6.0),
                "Speaker 2",
                Some("SPEAKER_02"),
                "Hi & welcome"
            ),
            seg(
                4.5,
                Some(6.0),
                "Roger Bingham",
                Some("Roger Bingham"),
                "Thanks"
            ),
            seg(
                60.0,
                Some(62.25),
                "",
                None,
                "No speaker here, split over two lines."
            ),
        ]
    );
    let texts: Vec<&str> = doc.pages[0]
        .blocks
        .iter()
        .map(|b| b.text.as_str())
        .collect();
    assert_eq!(
        texts,
        vec![
            "Roger Bingham: We are in New York City",
            "Speaker 2: Hi & welcome",
            "Roger Bingham: Thanks",
            "No speaker here, split over two lines.",
        ]
    );
}

#[test]
fn srt_name_prefixes_and_timings() {
    let srt = "\u{feff}1\r\n00:01:02,500 --> 00:01:05,000\r\nALICE SMITH: Hello there.\r\n\r\n2\r\n00:01:05,000 --> 00:01:07,250\r\nThe meeting is at 10:30 today.\r\n\r\n3\r\n00:01:08,000 --> 00:01:09,000\r\n- Bob: Sure.\r\n- [Carol] Me too.\r\n4\r\n00:01:09,000 --> 00:01:10,000\r\n<i>Music</i>\r\n";
    let doc = parse("meeting.srt", srt.as_bytes()).unwrap();
    assert_eq!(
        doc.segments,
        vec![
            seg(
                62.5,
                Some(65.0),
                "Alice Smith",
                Some("ALICE SMITH"),
                "Hello there."
            ),
            seg(
                65.0,
                Some(67.25),
                "",
                None,
                "The meeting is at 10:30 today."
            ),
            seg(68.0, Some(69.0), "Bob", Some("Bob"), "Sure."),
            seg(68.0, Some(69.0), "Carol", Some("Carol"), "Me too."),
            seg(69.0, Some(70.0), "", None, "Music"),
        ]
    );
}

#[test]
fn transcription_results_become_documents() {
    let doc = segments_to_document(vec![
        seg(0.0, Some(2.0), "Ann", Some("spk_0"), "Good morning."),
        seg(2.0, None, "", None, "   "),
        seg(2.5, None, "", None, "Unattributed words."),
    ]);
    assert_eq!(doc.kind, DocumentKind::Transcript);
    assert_eq!(doc.page_count, 1);
    assert_eq!(doc.segments.len(), 2, "blank segments are dropped");
    let texts: Vec<&str> = doc.pages[0]
        .blocks
        .iter()
        .map(|b| b.text.as_str())
        .collect();
    assert_eq!(texts, vec!["Ann: Good morning.", "Unattributed words."]);
}
