//! Reading Office Open XML packages: zip parts with size limits, relationships, and small
//! quick-xml helpers shared by the Word and PowerPoint parsers.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesRef, BytesStart};
use zip::ZipArchive;

use crate::ParseError;

/// The most one XML part may expand to.
pub(crate) const MAX_PART_BYTES: u64 = 256 * 1024 * 1024;

/// The OLE2 compound-file signature: legacy Office files and password-protected OOXML.
pub(crate) const CFB_MAGIC: &[u8] = &[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];

/// An opened zip package.
pub(crate) struct Package<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    format: &'static str,
}

impl<'a> Package<'a> {
    /// Opens `bytes` as the zip package of a `format` (e.g. `"Word document"`).
    pub(crate) fn open(bytes: &'a [u8], format: &'static str) -> Result<Self, ParseError> {
        if bytes.starts_with(CFB_MAGIC) {
            return Err(ParseError::Encrypted(format.to_owned()));
        }
        if !bytes.starts_with(b"PK") {
            return Err(ParseError::corrupt(
                format,
                "not a zip-based Office file (it may be a legacy binary file: save it in the current format)",
            ));
        }
        let archive = ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
            ParseError::corrupt(
                format,
                format!("the zip container cannot be read ({e}); the file may be truncated"),
            )
        })?;
        Ok(Self { archive, format })
    }

    /// Whether the package has a part called `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// All part names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(|n| n.ok().map(|n| n.into_owned()))
            .collect()
    }

    /// The text of part `name`, `None` when there is no such part.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<String>, ParseError> {
        let format = self.format;
        let mut file = match self.archive.by_name(name) {
            Ok(file) => file,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => {
                return Err(ParseError::corrupt(
                    format,
                    format!("part {name} cannot be read ({e})"),
                ));
            }
        };
        if file.size() > MAX_PART_BYTES {
            return Err(part_too_large(name));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0).min(1 << 24));
        (&mut file)
            .take(MAX_PART_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| {
                ParseError::corrupt(format, format!("part {name} cannot be read ({e})"))
            })?;
        if bytes.len() as u64 > MAX_PART_BYTES {
            return Err(part_too_large(name));
        }
        Ok(Some(decode_xml(&bytes)))
    }

    /// The text of part `name`, `Corrupt` when it is missing.
    pub(crate) fn read_required(&mut self, name: &str) -> Result<String, ParseError> {
        let format = self.format;
        self.read(name)?
            .ok_or_else(|| ParseError::corrupt(format, format!("part {name} is missing")))
    }

    /// The relationships of part `source` (`word/document.xml` → its `.rels`), as
    /// id → (type, resolved target path).
    pub(crate) fn relationships(
        &mut self,
        source: &str,
    ) -> Result<HashMap<String, (String, String)>, ParseError> {
        let (dir, file) = match source.rsplit_once('/') {
            Some((dir, file)) => (dir, file),
            None => ("", source),
        };
        let rels_path = if dir.is_empty() {
            format!("_rels/{file}.rels")
        } else {
            format!("{dir}/_rels/{file}.rels")
        };
        let Some(xml) = self.read(&rels_path)? else {
            return Ok(HashMap::new());
        };
        let mut out = HashMap::new();
        let mut reader = quick_xml::Reader::from_str(&xml);
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e))
                    if local(&e) == "Relationship" =>
                {
                    if attr(&e, "TargetMode").as_deref() == Some("External") {
                        continue;
                    }
                    if let (Some(id), Some(target)) = (attr(&e, "Id"), attr(&e, "Target")) {
                        let kind = attr(&e, "Type").unwrap_or_default();
                        out.insert(id, (kind, resolve_path(dir, &target)));
                    }
                }
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(_) => {}
                Err(e) => return Err(self.xml_error(&rels_path, e)),
            }
        }
        Ok(out)
    }

    /// A `Corrupt` error for malformed XML in `part`.
    pub(crate) fn xml_error(&self, part: &str, e: impl std::fmt::Display) -> ParseError {
        ParseError::corrupt(self.format, format!("malformed XML in {part} ({e})"))
    }

    /// The `dc:title` of `docProps/core.xml`, when set.
    pub(crate) fn core_title(&mut self) -> Option<String> {
        let xml = self.read("docProps/core.xml").ok()??;
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut in_title = false;
        let mut title = String::new();
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Start(e)) if local(&e) == "title" => in_title = true,
                Ok(quick_xml::events::Event::End(e)) if e.local_name().as_ref() == "title" => {
                    break;
                }
                Ok(quick_xml::events::Event::Text(t)) if in_title => {
                    title.push_str(&t.xml10_content());
                }
                Ok(quick_xml::events::Event::GeneralRef(r)) if in_title => {
                    title.push_str(&entity(&r));
                }
                Ok(quick_xml::events::Event::Eof) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let title = crate::util::collapse_ws(&title);
        (!title.is_empty()).then_some(title)
    }
}

fn part_too_large(name: &str) -> ParseError {
    ParseError::TooLarge(format!(
        "part {name} expands beyond {} MiB",
        MAX_PART_BYTES / (1024 * 1024)
    ))
}

/// Decodes an XML part: UTF-8 (BOM stripped) or UTF-16 with a BOM.
fn decode_xml(bytes: &[u8]) -> String {
    if let Some((encoding, bom_len)) = encoding_rs::Encoding::for_bom(bytes) {
        let body = bytes.get(bom_len..).unwrap_or_default();
        return encoding.decode_without_bom_handling(body).0.into_owned();
    }
    String::from_utf8_lossy(bytes).into_owned()
}

/// Resolves a relationship target against the directory of its source part.
pub(crate) fn resolve_path(dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if let Some(abs) = target.strip_prefix('/') {
        return normalize(abs.split('/').collect());
    } else if dir.is_empty() {
        Vec::new()
    } else {
        dir.split('/').collect()
    };
    parts.extend(target.split('/'));
    normalize(parts)
}

fn normalize(parts: Vec<&str>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in parts {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    out.join("/")
}

/// The local name of an element (`w:p` → `p`).
pub(crate) fn local(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_owned()
}

/// The unescaped value of the attribute whose local name is `name`.
pub(crate) fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.attributes().with_checks(false).flatten().find_map(|a| {
        let key = a.key.as_ref();
        let key_local = key.rsplit_once(':').map_or(key, |(_, l)| l);
        if key_local == name {
            Some(
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map(|v| v.into_owned())
                    .unwrap_or_else(|_| a.value.into_owned()),
            )
        } else {
            None
        }
    })
}

/// The text of an entity or character reference (`amp` → `&`, `#x41` → `A`).
pub(crate) fn entity(r: &BytesRef<'_>) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    quick_xml::escape::resolve_predefined_entity(r)
        .map(str::to_owned)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relationship_targets() {
        assert_eq!(
            resolve_path("ppt", "slides/slide1.xml"),
            "ppt/slides/slide1.xml"
        );
        assert_eq!(
            resolve_path("ppt/slides", "../notesSlides/notesSlide1.xml"),
            "ppt/notesSlides/notesSlide1.xml"
        );
        assert_eq!(
            resolve_path("word", "/word/document.xml"),
            "word/document.xml"
        );
        assert_eq!(resolve_path("", "word/document.xml"), "word/document.xml");
    }
}
