//! PowerPoint presentations (`.pptx`): one page per slide, in presentation order; the
//! slide title is the heading of the slide's blocks; speaker notes follow the slide.

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::ooxml::{Package, attr, entity, local};
use crate::util::{DocBuilder, collapse_ws};
use crate::{DocumentKind, ParseError, ParsedDocument};

const FORMAT: &str = "PowerPoint presentation";

/// Parses a `.pptx` file.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let mut pkg = Package::open(bytes, FORMAT)?;
    let slides = slide_parts(&mut pkg)?;
    let mut doc = DocBuilder::new(DocumentKind::Pptx);
    let mut first_title = None;
    for part in &slides {
        if doc.full() {
            break;
        }
        let Some(xml) = pkg.read(part)? else {
            doc.end_page();
            continue;
        };
        let slide = read_shapes(&xml, false).map_err(|e| pkg.xml_error(part, e))?;
        let notes = notes_of(&mut pkg, part)?;
        doc.clear_headings();
        if let Some(title) = &slide.title {
            first_title.get_or_insert_with(|| title.clone());
            doc.set_heading(1, title);
            doc.push_block(title.clone());
        }
        for block in slide.blocks {
            doc.push_block(block);
        }
        if !notes.is_empty() {
            doc.push_block(format!("Speaker notes: {}", notes.join("\n")));
        }
        doc.end_page();
    }
    let title = pkg.core_title().or(first_title);
    doc.finish(title)
}

/// The slide parts in presentation order.
fn slide_parts(pkg: &mut Package<'_>) -> Result<Vec<String>, ParseError> {
    let mut ordered = Vec::new();
    if let Some(xml) = pkg.read("ppt/presentation.xml")? {
        let rels = pkg.relationships("ppt/presentation.xml")?;
        let mut reader = Reader::from_str(&xml);
        loop {
            match reader.read_event() {
                Ok(Event::Start(e) | Event::Empty(e)) if local(&e) == "sldId" => {
                    let rid = e
                        .attributes()
                        .with_checks(false)
                        .flatten()
                        .find(|a| a.key.as_ref().ends_with(":id"))
                        .map(|a| a.value.into_owned());
                    if let Some((_, target)) = rid.and_then(|rid| rels.get(&rid))
                        && pkg.has(target)
                    {
                        ordered.push(target.clone());
                    }
                }
                Ok(Event::Eof) => break,
                Ok(_) => {}
                Err(e) => return Err(pkg.xml_error("ppt/presentation.xml", e)),
            }
        }
    }
    if ordered.is_empty() {
        // no usable presentation part: take the slide files by number
        let mut found: Vec<(u32, String)> = pkg
            .names()
            .into_iter()
            .filter_map(|name| {
                let n = name
                    .strip_prefix("ppt/slides/slide")?
                    .strip_suffix(".xml")?
                    .parse()
                    .ok()?;
                Some((n, name))
            })
            .collect();
        found.sort();
        ordered = found.into_iter().map(|(_, name)| name).collect();
    }
    if ordered.is_empty() {
        return Err(ParseError::corrupt(
            FORMAT,
            "no slides found (is this really a .pptx file?)",
        ));
    }
    Ok(ordered)
}

/// The body text of the notes page of `slide_part`, one entry per paragraph.
fn notes_of(pkg: &mut Package<'_>, slide_part: &str) -> Result<Vec<String>, ParseError> {
    let rels = pkg.relationships(slide_part)?;
    let Some((_, target)) = rels
        .values()
        .find(|(kind, _)| kind.ends_with("/notesSlide"))
    else {
        return Ok(Vec::new());
    };
    let target = target.clone();
    let Some(xml) = pkg.read(&target)? else {
        return Ok(Vec::new());
    };
    let notes = read_shapes(&xml, true).map_err(|e| pkg.xml_error(&target, e))?;
    Ok(notes.blocks)
}

/// What a slide (or notes page) says.
#[derive(Default)]
struct SlideText {
    title: Option<String>,
    /// One block per text shape (its paragraphs on separate lines) or table row.
    blocks: Vec<String>,
}

/// The kind of placeholder of the shape being read.
#[derive(Default)]
struct Shape {
    placeholder: Option<String>,
    paras: Vec<String>,
}

/// Reads the text shapes of a slide; with `notes_only`, only body placeholders count.
fn read_shapes(xml: &str, notes_only: bool) -> Result<SlideText, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = SlideText::default();
    let mut shapes: Vec<Shape> = Vec::new();
    let mut para: Option<String> = None;
    let mut in_text = false;
    let mut skip = 0usize;
    let mut tables = 0usize;
    let mut row: Option<Vec<String>> = None;
    let mut cell: Option<String> = None;
    loop {
        let event = reader.read_event().map_err(|e| e.to_string())?;
        match event {
            Event::Start(e) => {
                if skip > 0 {
                    skip += 1;
                    continue;
                }
                match local(&e).as_str() {
                    // slide numbers and dates
                    "fld" => skip = 1,
                    "sp" => shapes.push(Shape::default()),
                    "ph" => set_placeholder(&mut shapes, &e),
                    "p" => para = Some(String::new()),
                    "t" => in_text = true,
                    "tbl" => tables += 1,
                    "tr" if tables == 1 => row = Some(Vec::new()),
                    "tc" if tables == 1 => cell = Some(String::new()),
                    _ => {}
                }
            }
            Event::Empty(e) => {
                if skip > 0 {
                    continue;
                }
                match local(&e).as_str() {
                    "ph" => set_placeholder(&mut shapes, &e),
                    "br" => {
                        if let Some(p) = para.as_mut() {
                            p.push('\n');
                        }
                    }
                    _ => {}
                }
            }
            Event::End(e) => {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                match e.local_name().as_ref() {
                    "t" => in_text = false,
                    "p" => {
                        let text = para.take().map(|p| {
                            p.split('\n')
                                .map(collapse_ws)
                                .filter(|l| !l.is_empty())
                                .collect::<Vec<_>>()
                                .join("\n")
                        });
                        let Some(text) = text.filter(|t| !t.is_empty()) else {
                            continue;
                        };
                        if let Some(cell) = cell.as_mut() {
                            if !cell.is_empty() {
                                cell.push(' ');
                            }
                            cell.push_str(&collapse_ws(&text));
                        } else if let Some(shape) = shapes.last_mut() {
                            shape.paras.push(text);
                        } else if !notes_only {
                            out.blocks.push(text);
                        }
                    }
                    "tc" if tables == 1 => {
                        if let (Some(c), Some(r)) = (cell.take(), row.as_mut()) {
                            r.push(c);
                        }
                    }
                    "tr" if tables == 1 => {
                        if let Some(r) = row.take()
                            && r.iter().any(|c| !c.is_empty())
                            && !notes_only
                        {
                            out.blocks.push(r.join(" | "));
                        }
                    }
                    "tbl" => tables = tables.saturating_sub(1),
                    "sp" => {
                        if let Some(shape) = shapes.pop() {
                            finish_shape(shape, notes_only, &mut out);
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(t) if in_text && skip == 0 => {
                if let Some(p) = para.as_mut() {
                    p.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) if in_text && skip == 0 => {
                if let Some(p) = para.as_mut() {
                    p.push_str(&entity(&r));
                }
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}

fn set_placeholder(shapes: &mut [Shape], e: &quick_xml::events::BytesStart<'_>) {
    if let Some(shape) = shapes.last_mut() {
        // a placeholder without a type is a body placeholder
        shape.placeholder = Some(attr(e, "type").unwrap_or_else(|| "body".to_owned()));
    }
}

fn finish_shape(shape: Shape, notes_only: bool, out: &mut SlideText) {
    if shape.paras.is_empty() {
        return;
    }
    let kind = shape.placeholder.as_deref();
    if notes_only {
        if matches!(kind, Some("body")) {
            out.blocks.extend(shape.paras);
        }
        return;
    }
    match kind {
        Some("title" | "ctrTitle") if out.title.is_none() => {
            out.title = Some(collapse_ws(&shape.paras.join(" ")));
        }
        Some("sldNum" | "dt" | "ftr" | "hdr") => {}
        _ => out.blocks.push(shape.paras.join("\n")),
    }
}
