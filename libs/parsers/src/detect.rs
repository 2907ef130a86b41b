//! Deciding what a file is: by extension, then by its first bytes.

use std::io::Cursor;

use crate::ooxml::CFB_MAGIC;
use crate::text::looks_binary;
use crate::{DocumentKind, ParseError};

/// Audio and video extensions: such files are transcribed, not parsed.
const MEDIA: &[&str] = &[
    "mp3", "wav", "m4a", "ogg", "oga", "opus", "flac", "aac", "wma", "aif", "aiff", "amr", "mka",
    "weba", "mp4", "m4v", "mov", "webm", "mkv", "avi", "wmv", "flv", "mpeg", "mpg", "3gp", "mts",
    "m2ts", "ogv",
];

/// Extensions read as plain text: prose, configuration, source code.
const TEXT: &[&str] = &[
    "txt",
    "text",
    "log",
    "rst",
    "adoc",
    "asciidoc",
    "org",
    "tex",
    "bib",
    "ini",
    "cfg",
    "conf",
    "toml",
    "yaml",
    "yml",
    "xml",
    "properties",
    "env",
    "sql",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "bat",
    "cmd",
    "py",
    "rs",
    "go",
    "java",
    "kt",
    "kts",
    "scala",
    "c",
    "h",
    "cpp",
    "cc",
    "cxx",
    "hpp",
    "hh",
    "cs",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "rb",
    "php",
    "pl",
    "pm",
    "swift",
    "r",
    "lua",
    "dart",
    "css",
    "scss",
    "sass",
    "less",
    "vue",
    "svelte",
    "proto",
    "graphql",
    "gql",
    "diff",
    "patch",
    "gradle",
    "cmake",
    "mk",
    "eml",
    "nfo",
    "me",
    "readme",
    "license",
    "gitignore",
    "dockerfile",
    "makefile",
    "tf",
    "hcl",
    "lst",
    "asc",
];

/// Extensions known to be unreadable, with what to do instead.
fn unsupported_hint(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "doc" | "dot" | "rtf" | "odt" | "pages" => "save it as .docx or PDF",
        "ppt" | "pps" | "pot" | "odp" | "key" => "save it as .pptx or PDF",
        "xls" | "xlsb" | "ods" | "numbers" => "save it as .xlsx or CSV",
        "gif" | "bmp" | "heic" | "heif" | "avif" | "svg" => {
            "images are read as PNG, JPEG, TIFF or WebP; convert it to one of those"
        }
        "zip" | "gz" | "tgz" | "tar" | "7z" | "rar" | "bz2" | "xz" | "zst" => {
            "extract the archive and upload its files"
        }
        "exe" | "dll" | "so" | "dylib" | "bin" | "msi" | "dmg" | "iso" | "apk" | "jar"
        | "class" | "o" | "a" | "wasm" | "pyc" => "executables and binaries are not documents",
        "epub" | "mobi" | "azw" | "azw3" => "convert it to PDF",
        _ => return None,
    })
}

/// The lowercase extension of `filename`'s last path component (`.bashrc`-style names
/// have none).
pub fn extension(filename: &str) -> Option<String> {
    let name = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() && !TEXT.contains(&ext.to_ascii_lowercase().as_str()) {
        // ".bashrc"-style names have no extension
        return None;
    }
    let ext = ext.trim().to_ascii_lowercase();
    (!ext.is_empty()).then_some(ext)
}

/// The kind a lowercase extension names, if it names a readable one.
fn kind_of_extension(ext: &str) -> Option<DocumentKind> {
    match ext {
        "pdf" => Some(DocumentKind::Pdf),
        "docx" | "docm" | "dotx" | "dotm" => Some(DocumentKind::Docx),
        "pptx" | "pptm" | "ppsx" | "ppsm" | "potx" => Some(DocumentKind::Pptx),
        "xlsx" | "xlsm" | "xltx" | "xltm" => Some(DocumentKind::Xlsx),
        "csv" | "tsv" | "tab" => Some(DocumentKind::Csv),
        "json" | "jsonl" | "ndjson" | "geojson" => Some(DocumentKind::Json),
        "vtt" | "webvtt" | "srt" => Some(DocumentKind::Transcript),
        "png" | "jpg" | "jpeg" | "jpe" | "tif" | "tiff" | "webp" => Some(DocumentKind::Image),
        "md" | "markdown" | "mdown" | "mkd" | "mkdn" | "mdwn" | "mdx" => {
            Some(DocumentKind::Markdown)
        }
        "html" | "htm" | "xhtml" | "shtml" => Some(DocumentKind::Html),
        e if TEXT.contains(&e) => Some(DocumentKind::Text),
        _ => None,
    }
}

/// The kind `filename`'s extension names, without looking at any bytes; `None` for
/// unknown extensions, media and names without one. [`detect`] trusts the same table.
pub fn kind_by_extension(filename: &str) -> Option<DocumentKind> {
    kind_of_extension(&extension(filename)?)
}

/// Whether `filename` is audio or video (by extension), which needs transcription
/// instead of parsing.
pub fn is_media(filename: &str) -> bool {
    extension(filename).is_some_and(|ext| MEDIA.contains(&ext.as_str()))
}

/// Decides the kind of a file by its extension, falling back to its first bytes
/// (`%PDF`, a zip holding `word/`, `ppt/` or `xl/`, WebVTT/SRT, HTML, JSON, text).
///
/// Known extensions are trusted: a `.pdf` that is not a PDF is reported as corrupt by
/// [`crate::parse`].
///
/// # Errors
///
/// `Unsupported` for media files, known binary formats (unless the bytes are a PDF or
/// an Office file under the wrong name) and bytes that match nothing readable.
pub fn detect(filename: &str, bytes: &[u8]) -> Result<DocumentKind, ParseError> {
    let ext = extension(filename);
    if let Some(ext) = ext.as_deref() {
        if MEDIA.contains(&ext) {
            return Err(ParseError::Unsupported(format!(
                ".{ext} (audio and video are transcribed, not parsed)"
            )));
        }
        if let Some(kind) = kind_of_extension(ext) {
            return Ok(kind);
        }
        if let Some(hint) = unsupported_hint(ext) {
            // a PDF or Office file under a wrong name is still that file
            return sniff_container(bytes)
                .ok_or_else(|| ParseError::Unsupported(format!(".{ext} ({hint})")));
        }
    }
    sniff(bytes).ok_or_else(|| {
        ParseError::Unsupported(match ext {
            Some(ext) => format!(".{ext}"),
            None => "(binary file without a known extension)".to_owned(),
        })
    })
}

/// PDF by its header, or an Office file by the parts of its zip.
fn sniff_container(bytes: &[u8]) -> Option<DocumentKind> {
    let head = &bytes[..bytes.len().min(1024)];
    if head.windows(5).any(|w| w == b"%PDF-") {
        return Some(DocumentKind::Pdf);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return sniff_zip(bytes);
    }
    None
}

/// Whether the bytes start like a PNG, JPEG, TIFF or WebP image.
fn sniff_image(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x89PNG\r\n\x1a\n")
        || bytes.starts_with(b"\xff\xd8\xff")
        || bytes.starts_with(b"II*\0")
        || bytes.starts_with(b"MM\0*")
        || (bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP")
}

/// Whether a file is an image whose text only text recognition can read: by its
/// extension, or (without a known one) by its first bytes.
pub fn is_image(filename: &str, bytes: &[u8]) -> bool {
    match extension(filename).as_deref().and_then(kind_of_extension) {
        Some(kind) => kind == DocumentKind::Image,
        None => !is_media(filename) && sniff_image(bytes),
    }
}

/// The kind the bytes look like, if any readable one.
fn sniff(bytes: &[u8]) -> Option<DocumentKind> {
    if let Some(kind) = sniff_container(bytes) {
        return Some(kind);
    }
    if sniff_image(bytes) {
        return Some(DocumentKind::Image);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return None;
    }
    if bytes.starts_with(CFB_MAGIC) || bytes.is_empty() || looks_binary(bytes) {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    let lower = text
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    if text.starts_with("WEBVTT") || looks_like_srt(text) {
        return Some(DocumentKind::Transcript);
    }
    if lower.starts_with("<!doctype html")
        || lower.starts_with("<html")
        || lower.contains("<html")
        || lower.contains("<body")
        || lower.contains("<head>")
    {
        return Some(DocumentKind::Html);
    }
    if (text.starts_with('{') || text.starts_with('['))
        && std::str::from_utf8(bytes)
            .ok()
            .is_some_and(|s| serde_json::from_str::<serde_json::Value>(s).is_ok())
    {
        return Some(DocumentKind::Json);
    }
    let first_line = text.lines().next().unwrap_or("");
    if first_line.starts_with("# ") || first_line.starts_with("## ") || text.contains("\n```") {
        return Some(DocumentKind::Markdown);
    }
    Some(DocumentKind::Text)
}

/// `1` then `00:00:01,000 --> ...`.
fn looks_like_srt(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let second = lines.next().unwrap_or("");
    (first.trim().chars().all(|c| c.is_ascii_digit()) && second.contains("-->"))
        || first.contains("-->")
}

/// An OOXML package by the parts it holds.
fn sniff_zip(bytes: &[u8]) -> Option<DocumentKind> {
    let archive = zip::ZipArchive::new(Cursor::new(bytes)).ok()?;
    let names: Vec<String> = archive
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.into_owned()))
        .collect();
    let has = |prefix: &str| names.iter().any(|n| n.starts_with(prefix));
    if has("word/") {
        Some(DocumentKind::Docx)
    } else if has("ppt/") {
        Some(DocumentKind::Pptx)
    } else if has("xl/") {
        Some(DocumentKind::Xlsx)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions() {
        assert_eq!(extension("a/b/Report.PDF").as_deref(), Some("pdf"));
        assert_eq!(extension("noext"), None);
        assert_eq!(extension(".bashrc"), None);
        assert_eq!(
            kind_by_extension("out/report.md"),
            Some(DocumentKind::Markdown)
        );
        assert_eq!(kind_by_extension("chart.PNG"), Some(DocumentKind::Image));
        assert_eq!(kind_by_extension("chart.gif"), None);
        assert!(is_image("scan.TIFF", b""));
        assert!(is_image("photo", b"\xff\xd8\xff\xe0 jpeg"));
        assert!(is_image("upload", b"RIFF\0\0\0\0WEBPVP8 "));
        assert!(
            !is_image("notes.txt", b"\x89PNG\r\n\x1a\n"),
            "a known extension decides"
        );
        assert!(!is_image("talk.mp3", b"\xff\xd8\xff"));
        assert_eq!(kind_by_extension("noext"), None);
        assert!(is_media("talk.MP3"));
        assert!(!is_media("talk.txt"));
    }
}
