//! Transcripts: WebVTT and SRT cues with their timings and speakers, and the documents
//! made from transcription results.

use crate::text::decode;
use crate::util::{collapse_ws, title_case};
use crate::{AudioSegment, Block, DocumentKind, Page, ParseError, ParsedDocument};

const FORMAT: &str = "transcript";

/// Makes the document of a transcript: one page whose blocks are the segments
/// (`Speaker: text`, or the text alone when the speaker is unknown); segments without text
/// are dropped.
pub fn segments_to_document(segments: Vec<AudioSegment>) -> ParsedDocument {
    let segments: Vec<AudioSegment> = segments
        .into_iter()
        .filter(|s| !s.text.trim().is_empty())
        .collect();
    let blocks = segments
        .iter()
        .map(|s| Block {
            heading: None,
            text: segment_line(s),
        })
        .collect();
    ParsedDocument {
        kind: DocumentKind::Transcript,
        pages: vec![Page { number: 1, blocks }],
        title: None,
        segments,
        page_count: 1,
        scanned: Vec::new(),
        page_sizes: Vec::new(),
    }
}

/// `Speaker: text`, or the text alone.
pub(crate) fn segment_line(s: &AudioSegment) -> String {
    let text = s.text.trim();
    if s.speaker.is_empty() {
        text.to_owned()
    } else {
        format!("{}: {text}", s.speaker)
    }
}

/// Parses a WebVTT or SRT file (both use `start --> end` timing lines).
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let text = decode(bytes, FORMAT)?;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut segments = Vec::new();
    let mut saw_content = false;
    // a cue starts at its timing line and runs to the next blank line or timing line;
    // the WebVTT header, NOTE, STYLE and REGION blocks have no timing line
    let mut cue: Option<(f64, Option<f64>, Vec<&str>)> = None;
    let flush = |cue: &mut Option<(f64, Option<f64>, Vec<&str>)>,
                 segments: &mut Vec<AudioSegment>| {
        if let Some((start, end, payload)) = cue.take() {
            segments.extend(cue_segments(&payload, start, end));
        }
    };
    for line in text.lines() {
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            flush(&mut cue, &mut segments);
            continue;
        }
        saw_content = true;
        if line.contains("-->")
            && let Some((start, end)) = parse_timing(line)
        {
            if let Some((_, _, payload)) = cue.as_mut()
                && payload
                    .last()
                    .is_some_and(|l| l.trim().chars().all(|c| c.is_ascii_digit()))
            {
                // the SRT index of the next cue
                payload.pop();
            }
            flush(&mut cue, &mut segments);
            cue = Some((start, end, Vec::new()));
        } else if let Some((_, _, payload)) = cue.as_mut() {
            payload.push(line);
        }
    }
    flush(&mut cue, &mut segments);
    if segments.is_empty() {
        if saw_content {
            return Err(ParseError::corrupt(
                FORMAT,
                "no cues with `start --> end` timings found (expected WebVTT or SRT)",
            ));
        }
        return Err(ParseError::Empty);
    }
    Ok(segments_to_document(segments))
}

/// `00:01:02,500 --> 00:01:05.000 align:start` → (62.5, 65.0).
fn parse_timing(line: &str) -> Option<(f64, Option<f64>)> {
    let (start, rest) = line.split_once("-->")?;
    let start = parse_timestamp(start.trim())?;
    let end = rest.split_whitespace().next().and_then(parse_timestamp);
    Some((start, end))
}

/// `HH:MM:SS.mmm`, `HH:MM:SS,mmm` or `MM:SS.mmm` in seconds.
pub(crate) fn parse_timestamp(s: &str) -> Option<f64> {
    let parts: Vec<&str> = s.split(':').collect();
    let (h, m, sec) = match parts.as_slice() {
        [h, m, s] => (*h, *m, *s),
        [m, s] => ("0", *m, *s),
        _ => return None,
    };
    let h: u64 = h.trim().parse().ok()?;
    let m: u64 = m.trim().parse().ok()?;
    let sec = sec.trim().replace(',', ".");
    if sec.is_empty() || !sec.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let sec: f64 = sec.parse().ok()?;
    if m >= 60 || sec >= 60.0 {
        return None;
    }
    Some(h as f64 * 3600.0 + m as f64 * 60.0 + sec)
}

/// The segments of one cue: a new segment at each change of speaker.
fn cue_segments(lines: &[&str], start: f64, end: Option<f64>) -> Vec<AudioSegment> {
    let mut out: Vec<AudioSegment> = Vec::new();
    let mut current: Option<String> = None;
    for line in lines {
        let (speaker, text) = match voice_tag(line) {
            Some((raw, rest)) => (Some(raw), rest),
            None => match speaker_prefix(line) {
                Some((raw, rest)) => (Some(raw), rest.to_owned()),
                None => (None, (*line).to_owned()),
            },
        };
        let text = collapse_ws(&decode_entities(&strip_tags(&text)));
        if let Some(raw) = speaker {
            current = Some(raw);
        }
        if text.is_empty() {
            continue;
        }
        let same = out
            .last()
            .is_some_and(|s| s.original_speaker.as_deref() == current.as_deref());
        if same && let Some(last) = out.last_mut() {
            last.text.push(' ');
            last.text.push_str(&text);
            continue;
        }
        out.push(AudioSegment {
            start,
            end,
            speaker: current.as_deref().map(display_name).unwrap_or_default(),
            original_speaker: current.clone(),
            text,
        });
    }
    out
}

/// `<v Roger Bingham>text</v>` or `<v.loud Roger>text` → ("Roger Bingham", "text").
fn voice_tag(line: &str) -> Option<(String, String)> {
    let trimmed = line.trim_start();
    let rest = trimmed.strip_prefix("<v")?;
    if !rest.starts_with([' ', '.', '\t']) {
        return None;
    }
    let close = rest.find('>')?;
    let annotation = &rest[..close];
    // classes come first: `.loud.fast Name`
    let name = if annotation.starts_with('.') {
        annotation
            .split_once(char::is_whitespace)
            .map_or("", |(_, n)| n)
    } else {
        annotation
    };
    let name = collapse_ws(name);
    if name.is_empty() {
        return None;
    }
    Some((name, rest[close + 1..].to_owned()))
}

/// `Name: text`, `- Name: text`, `>> NAME: text` or `[Name] text` → ("Name", "text").
fn speaker_prefix(line: &str) -> Option<(String, &str)> {
    let line = line
        .trim_start()
        .trim_start_matches(">>")
        .trim_start_matches("- ")
        .trim_start();
    if let Some(rest) = line.strip_prefix('[') {
        let (name, text) = rest.split_once(']')?;
        let text = text.trim_start().trim_start_matches(':');
        if plausible_name(name) && !text.trim().is_empty() {
            return Some((collapse_ws(name), text));
        }
        return None;
    }
    let (name, text) = line.split_once(':')?;
    if !text.starts_with([' ', '\t']) || text.trim().is_empty() || !plausible_name(name) {
        return None;
    }
    let first = name.trim().chars().next()?;
    if first.is_alphabetic() && !first.is_uppercase() {
        return None;
    }
    Some((collapse_ws(name), text))
}

/// A short label of at most four words, with a letter and no sentence punctuation.
fn plausible_name(name: &str) -> bool {
    let name = name.trim();
    !name.is_empty()
        && name.chars().count() <= 40
        && name.split_whitespace().count() <= 4
        && name.chars().any(char::is_alphabetic)
        && !name.contains(['.', ',', '?', '!', ';', '"', '<', '>', '(', ')'])
}

/// The display name of a raw speaker label: `SPEAKER_01` → `Speaker 1`,
/// `JOHN SMITH` → `John Smith`, `jane_doe` → `jane doe`.
/// The display form of a speaker label: `SPEAKER_01` → `Speaker 1`, `JOHN SMITH` → `John Smith`.
pub fn display_name(raw: &str) -> String {
    let cleaned = collapse_ws(&raw.replace('_', " "));
    let lower = cleaned.to_lowercase();
    for prefix in ["speaker", "spk", "spkr"] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            let digits = rest.trim_start_matches([' ', '-', '#']);
            if !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit())
                && let Ok(n) = digits.parse::<u64>()
            {
                return format!("Speaker {n}");
            }
        }
    }
    let has_lower = cleaned.chars().any(char::is_lowercase);
    let letters = cleaned.chars().filter(|c| c.is_alphabetic()).count();
    if !has_lower && letters > 1 {
        return title_case(&cleaned);
    }
    cleaned
}

/// Removes `<...>` tags (WebVTT classes, voices, timestamps; SRT `<i>`, `<font>`).
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&lrm;", "")
        .replace("&rlm;", "")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("00:01:02,500"), Some(62.5));
        assert_eq!(parse_timestamp("01:02.250"), Some(62.25));
        assert_eq!(parse_timestamp("1:00:00.000"), Some(3600.0));
        assert_eq!(parse_timestamp("aa:00"), None);
        assert_eq!(parse_timestamp("00:61:00"), None);
    }

    #[test]
    fn speakers() {
        assert_eq!(display_name("SPEAKER_01"), "Speaker 1");
        assert_eq!(display_name("JOHN SMITH"), "John Smith");
        assert_eq!(display_name("Roger Bingham"), "Roger Bingham");
        assert_eq!(
            speaker_prefix("Alice: hello there"),
            Some(("Alice".to_owned(), " hello there"))
        );
        assert_eq!(speaker_prefix("at 10:30 we met"), None);
        assert_eq!(speaker_prefix("see http://x.y"), None);
        assert_eq!(speaker_prefix("well, then: go"), None);
        assert_eq!(
            voice_tag("<v.loud Mary Jane>Hi</v>"),
            Some(("Mary Jane".to_owned(), "Hi</v>".to_owned()))
        );
    }
}
