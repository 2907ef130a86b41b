//! PDF text layer, page by page.
//!
//! `lopdf` loads the file and decodes fonts; the content streams are interpreted here,
//! tracking the text and graphics matrices and glyph widths so that words, lines and
//! paragraphs come out separated: a run that starts off the previous baseline begins a
//! new line, a horizontal gap wider than a fraction of the font size is a space, and a
//! vertical gap clearly larger than the page's usual line spacing (or a change of font
//! size, or a jump upwards) starts a new paragraph.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, Encoding, Object, ObjectId};

use crate::util::DocBuilder;
use crate::{DocumentKind, ParseError, ParsedDocument};

const FORMAT: &str = "PDF";

/// The most a page's content (or a form it draws) may expand to.
const MAX_CONTENT_BYTES: usize = 64 * 1024 * 1024;
/// Nesting limit of form XObjects.
const MAX_FORM_DEPTH: usize = 8;
/// The most content operators interpreted for one page (forms drawn many times count
/// every time).
const MAX_OPS_PER_PAGE: usize = 4_000_000;

/// Parses a PDF: one page per PDF page (pages without text have no blocks).
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(ParseError::corrupt(
            FORMAT,
            "missing %PDF header (this is not a PDF file)",
        ));
    }
    let doc = match Document::load_mem(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            if bytes.windows(8).any(|w| w == b"/Encrypt") {
                return Err(ParseError::Encrypted(FORMAT.to_owned()));
            }
            return Err(ParseError::corrupt(FORMAT, e));
        }
    };
    // a document decrypted with the empty user password no longer has /Encrypt
    if doc.trailer.has(b"Encrypt") {
        return Err(ParseError::Encrypted(FORMAT.to_owned()));
    }
    let pages = doc.get_pages();
    if pages.is_empty() {
        return Err(ParseError::corrupt(FORMAT, "no pages found"));
    }
    let mut fonts = FontCache::default();
    let mut builder = DocBuilder::new(DocumentKind::Pdf);
    let mut scanned = Vec::new();
    let mut page_sizes = Vec::new();
    for (number, page_id) in pages.iter() {
        let (lines, image_area) = page_lines(&doc, *page_id, &mut fonts);
        let size = media_box(&doc, *page_id);
        let mut chars = 0;
        for para in paragraphs(&lines) {
            chars += para.chars().filter(|c| !c.is_whitespace()).count();
            builder.push_block(para);
        }
        if looks_scanned(chars, image_area, size.0 * size.1) {
            scanned.push(*number);
        }
        page_sizes.push(size);
        builder.end_page();
        if builder.full() {
            break;
        }
    }
    let mut parsed = builder.finish_with(info_title(&doc), !scanned.is_empty())?;
    parsed.scanned = scanned;
    parsed.page_sizes = page_sizes;
    Ok(parsed)
}

/// The area of a US Letter page, in square points: the unit the scanned-page rule scales.
const LETTER_AREA: f32 = 612.0 * 792.0;
/// A page looks scanned when images cover at least this share of it...
const SCAN_IMAGE_COVER: f32 = 0.5;
/// ... and its text layer holds fewer visible characters than this per Letter-sized area
/// (a page of prose holds 2,000 to 4,000; a scanner's stamp or a caption, tens to a few
/// hundred).
const SCAN_MAX_CHARS_PER_LETTER: f32 = 200.0;

/// Whether a page whose text layer holds `chars` visible characters and whose images
/// cover `image_area` square points of its `page_area` is a scan whose text recognition
/// must read: images cover most of it, and its text is too thin for its size. A page
/// without images is left alone however little text it has (a blank or a title page has
/// nothing more to read), and so is a page with a real text layer over its image (a
/// scanner's searchable PDF). docs/ingestion.md, "Scanned pages", says how the thresholds
/// were chosen.
pub(crate) fn looks_scanned(chars: usize, image_area: f32, page_area: f32) -> bool {
    if !(page_area.is_finite() && page_area > 0.0) {
        return false;
    }
    image_area >= SCAN_IMAGE_COVER * page_area
        && (chars as f32) < SCAN_MAX_CHARS_PER_LETTER * page_area / LETTER_AREA
}

/// A page's size in points from its (inherited) `/MediaBox`; US Letter when it has none
/// that reads.
fn media_box(doc: &Document, page_id: ObjectId) -> (f32, f32) {
    let mut dict = doc.get_dictionary(page_id).ok();
    for _ in 0..32 {
        let Some(d) = dict else { break };
        if let Some(b) = d
            .get(b"MediaBox")
            .ok()
            .and_then(|b| deref(doc, b))
            .and_then(|b| b.as_array().ok())
        {
            let n: Vec<f32> = b
                .iter()
                .filter_map(|o| deref(doc, o))
                .filter_map(number)
                .collect();
            if let [x0, y0, x1, y1] = n[..] {
                let (w, h) = ((x1 - x0).abs(), (y1 - y0).abs());
                if w > 0.0 && h > 0.0 {
                    return (w, h);
                }
            }
            break;
        }
        dict = d.get(b"Parent").ok().and_then(|p| deref_dict(doc, p));
    }
    (612.0, 792.0)
}

/// The `/Title` of the document information dictionary.
fn info_title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let info = deref(doc, info)?.as_dict().ok()?;
    let title = deref(doc, info.get(b"Title").ok()?)?;
    lopdf::decode_text_string(title).ok()
}

fn deref<'a>(doc: &'a Document, obj: &'a Object) -> Option<&'a Object> {
    doc.dereference(obj).ok().map(|(_, o)| o)
}

fn deref_dict<'a>(doc: &'a Document, obj: &'a Object) -> Option<&'a Dictionary> {
    deref(doc, obj)?.as_dict().ok()
}

fn number(obj: &Object) -> Option<f32> {
    obj.as_float().ok().filter(|f| f.is_finite())
}

// ---------------------------------------------------------------------------------------
// fonts

/// What the extractor needs of a font: how to decode it and how wide its glyphs are.
struct Font<'a> {
    encoding: Option<Encoding<'a>>,
    /// Type0 (composite) fonts use two-byte codes.
    two_byte: bool,
    first_char: u32,
    widths: Vec<f32>,
    cid_widths: HashMap<u32, f32>,
    default_width: f32,
    /// Glyph space to text space (1/1000, or a Type3 font's matrix).
    scale: f32,
    /// Whether widths come from the file rather than a guess.
    widths_known: bool,
}

impl<'a> Font<'a> {
    fn load(doc: &'a Document, dict: &'a Dictionary) -> Font<'a> {
        let subtype = dict
            .get(b"Subtype")
            .and_then(Object::as_name)
            .unwrap_or(b"");
        let two_byte = subtype == b"Type0";
        let encoding = dict.get_font_encoding(doc).ok().filter(|e| {
            // a composite font without a ToUnicode map cannot be decoded
            !(two_byte && matches!(e, Encoding::OneByteEncoding(_)))
        });
        let mut font = Font {
            encoding,
            two_byte,
            first_char: 0,
            widths: Vec::new(),
            cid_widths: HashMap::new(),
            default_width: if two_byte { 1000.0 } else { 500.0 },
            scale: 0.001,
            widths_known: false,
        };
        if subtype == b"Type3"
            && let Some(m) = dict
                .get(b"FontMatrix")
                .ok()
                .and_then(|o| deref(doc, o))
                .and_then(|o| o.as_array().ok())
            && let Some(a) = m.first().and_then(number)
            && a > 0.0
        {
            font.scale = a;
        }
        if two_byte {
            font.load_cid_widths(doc, dict);
        } else {
            font.load_simple_widths(doc, dict);
        }
        font
    }

    fn load_simple_widths(&mut self, doc: &'a Document, dict: &'a Dictionary) {
        let first = dict
            .get(b"FirstChar")
            .ok()
            .and_then(|o| deref(doc, o))
            .and_then(|o| o.as_i64().ok())
            .unwrap_or(0);
        let widths = dict
            .get(b"Widths")
            .ok()
            .and_then(|o| deref(doc, o))
            .and_then(|o| o.as_array().ok());
        if let Some(widths) = widths {
            self.first_char = u32::try_from(first).unwrap_or(0);
            self.widths = widths
                .iter()
                .map(|w| deref(doc, w).and_then(number).unwrap_or(0.0))
                .collect();
            self.widths_known = !self.widths.is_empty();
        }
        let missing = dict
            .get(b"FontDescriptor")
            .ok()
            .and_then(|o| deref_dict(doc, o))
            .and_then(|d| d.get(b"MissingWidth").ok())
            .and_then(number);
        if let Some(missing) = missing.filter(|m| *m > 0.0) {
            self.default_width = missing;
        }
        let base = dict
            .get(b"BaseFont")
            .and_then(Object::as_name)
            .unwrap_or(b"");
        if !self.widths_known && base.windows(7).any(|w| w == b"Courier") {
            self.default_width = 600.0;
            self.widths_known = true;
        }
    }

    fn load_cid_widths(&mut self, doc: &'a Document, dict: &'a Dictionary) {
        let Some(descendant) = dict
            .get(b"DescendantFonts")
            .ok()
            .and_then(|o| deref(doc, o))
            .and_then(|o| o.as_array().ok())
            .and_then(|a| a.first())
            .and_then(|o| deref_dict(doc, o))
        else {
            return;
        };
        if let Some(dw) = descendant.get(b"DW").ok().and_then(number) {
            self.default_width = dw;
        }
        self.widths_known = true;
        let Some(w) = descendant
            .get(b"W")
            .ok()
            .and_then(|o| deref(doc, o))
            .and_then(|o| o.as_array().ok())
        else {
            return;
        };
        // [c [w1 w2 ...]] or [c_first c_last w]
        let mut i = 0;
        while i < w.len() && self.cid_widths.len() < 65_536 {
            let Some(first) = deref(doc, &w[i]).and_then(number) else {
                break;
            };
            let first = first as u32;
            match w.get(i + 1).and_then(|o| deref(doc, o)) {
                Some(Object::Array(list)) => {
                    for (k, width) in list.iter().enumerate() {
                        if let Some(width) = deref(doc, width).and_then(number) {
                            self.cid_widths
                                .insert(first.saturating_add(k as u32), width);
                        }
                    }
                    i += 2;
                }
                Some(last) => {
                    let last = number(last).unwrap_or(0.0) as u32;
                    let width = w
                        .get(i + 2)
                        .and_then(|o| deref(doc, o))
                        .and_then(number)
                        .unwrap_or(self.default_width);
                    for code in first..=last.min(first.saturating_add(65_535)) {
                        self.cid_widths.insert(code, width);
                    }
                    i += 3;
                }
                None => break,
            }
        }
    }

    fn width(&self, code: u32) -> f32 {
        if self.two_byte {
            return self
                .cid_widths
                .get(&code)
                .copied()
                .unwrap_or(self.default_width);
        }
        code.checked_sub(self.first_char)
            .and_then(|i| self.widths.get(i as usize))
            .copied()
            .filter(|w| *w > 0.0)
            .unwrap_or(self.default_width)
    }

    fn decode(&self, bytes: &[u8]) -> String {
        match &self.encoding {
            Some(encoding) => encoding.bytes_to_string(bytes).unwrap_or_default(),
            // no usable encoding: Latin-1 reads right for most simple fonts
            None if !self.two_byte => bytes.iter().map(|b| char::from(*b)).collect(),
            None => String::new(),
        }
    }
}

/// Fonts by object id, shared by every page that uses them.
#[derive(Default)]
struct FontCache<'a> {
    fonts: HashMap<ObjectId, Rc<Font<'a>>>,
}

// ---------------------------------------------------------------------------------------
// geometry

type Matrix = [f32; 6];
const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

/// `a × b` in PDF's row-vector convention (apply `a`, then `b`).
fn mul(a: &Matrix, b: &Matrix) -> Matrix {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    ]
}

fn apply(m: &Matrix, x: f32, y: f32) -> (f32, f32) {
    (x * m[0] + y * m[2] + m[4], x * m[1] + y * m[3] + m[5])
}

fn matrix_from(operands: &[Object]) -> Option<Matrix> {
    if operands.len() < 6 {
        return None;
    }
    let mut m = [0.0; 6];
    for (slot, obj) in m.iter_mut().zip(operands) {
        *slot = number(obj)?;
    }
    Some(m)
}

// ---------------------------------------------------------------------------------------
// content interpretation

/// One line of text as laid out on the page.
struct Line {
    text: String,
    /// Baseline offset across the writing direction (larger = higher on the page).
    y: f32,
    /// Unit vector of the writing direction.
    dir: (f32, f32),
    size: f32,
}

/// Where the previous glyph run ended.
#[derive(Clone, Copy)]
struct RunEnd {
    x: f32,
    y: f32,
    dir: (f32, f32),
    size: f32,
}

#[derive(Clone)]
struct TextParams<'a> {
    font: Option<Rc<Font<'a>>>,
    size: f32,
    char_spacing: f32,
    word_spacing: f32,
    scale: f32,
    leading: f32,
    rise: f32,
}

impl Default for TextParams<'_> {
    fn default() -> Self {
        Self {
            font: None,
            size: 1.0,
            char_spacing: 0.0,
            word_spacing: 0.0,
            scale: 1.0,
            leading: 0.0,
            rise: 0.0,
        }
    }
}

struct Interp<'a, 'c> {
    doc: &'a Document,
    fonts: &'c mut FontCache<'a>,
    lines: Vec<Line>,
    last: Option<RunEnd>,
    ops: usize,
    forms: HashSet<ObjectId>,
    ctm: Matrix,
    stack: Vec<(Matrix, TextParams<'a>)>,
    text: TextParams<'a>,
    tm: Matrix,
    tlm: Matrix,
    /// Square points of the page the images drawn so far cover (overlaps counted twice).
    image_area: f32,
}

/// The lines of text of a page, in content-stream order, and the area its images cover.
fn page_lines<'a>(
    doc: &'a Document,
    page_id: ObjectId,
    fonts: &mut FontCache<'a>,
) -> (Vec<Line>, f32) {
    let Ok(content) = doc.get_page_content_with_limit(page_id, MAX_CONTENT_BYTES) else {
        return (Vec::new(), 0.0);
    };
    let resources = page_resources(doc, page_id);
    let mut interp = Interp {
        doc,
        fonts,
        lines: Vec::new(),
        last: None,
        ops: 0,
        forms: HashSet::new(),
        ctm: IDENTITY,
        stack: Vec::new(),
        text: TextParams::default(),
        tm: IDENTITY,
        tlm: IDENTITY,
        image_area: 0.0,
    };
    interp.run(&content, &resources, 0);
    (interp.lines, interp.image_area)
}

/// The resource dictionaries of a page, nearest first (inherited ones after).
fn page_resources(doc: &Document, page_id: ObjectId) -> Vec<&Dictionary> {
    let Ok((own, inherited)) = doc.get_page_resources(page_id) else {
        return Vec::new();
    };
    let mut out: Vec<&Dictionary> = own.into_iter().collect();
    out.extend(
        inherited
            .into_iter()
            .filter_map(|id| doc.get_dictionary(id).ok()),
    );
    out
}

impl<'a> Interp<'a, '_> {
    fn run(&mut self, content: &[u8], resources: &[&'a Dictionary], depth: usize) {
        for op in Content::decode_iter(content) {
            let Ok(op) = op else { break };
            self.ops += 1;
            if self.ops > MAX_OPS_PER_PAGE {
                return;
            }
            let o = &op.operands;
            let num = |i: usize| o.get(i).and_then(number).unwrap_or(0.0);
            match op.operator.as_str() {
                "q" if self.stack.len() < 256 => {
                    self.stack.push((self.ctm, self.text.clone()));
                }
                "Q" => {
                    if let Some((ctm, text)) = self.stack.pop() {
                        self.ctm = ctm;
                        self.text = text;
                    }
                }
                "cm" => {
                    if let Some(m) = matrix_from(o) {
                        self.ctm = mul(&m, &self.ctm);
                    }
                }
                "BT" => {
                    self.tm = IDENTITY;
                    self.tlm = IDENTITY;
                }
                "Tf" => {
                    self.text.size = num(1);
                    self.text.font = o
                        .first()
                        .and_then(|n| n.as_name().ok())
                        .and_then(|name| self.font(resources, name));
                }
                "Tc" => self.text.char_spacing = num(0),
                "Tw" => self.text.word_spacing = num(0),
                "Tz" => self.text.scale = num(0) / 100.0,
                "TL" => self.text.leading = num(0),
                "Ts" => self.text.rise = num(0),
                "Td" => self.move_line(num(0), num(1)),
                "TD" => {
                    self.text.leading = -num(1);
                    self.move_line(num(0), num(1));
                }
                "Tm" => {
                    if let Some(m) = matrix_from(o) {
                        self.tm = m;
                        self.tlm = m;
                    }
                }
                "T*" => self.next_line(),
                "Tj" => {
                    if let Some(Object::String(bytes, _)) = o.first() {
                        self.show(bytes, false);
                    }
                }
                "'" => {
                    self.next_line();
                    if let Some(Object::String(bytes, _)) = o.first() {
                        self.show(bytes, false);
                    }
                }
                "\"" => {
                    self.text.word_spacing = num(0);
                    self.text.char_spacing = num(1);
                    self.next_line();
                    if let Some(Object::String(bytes, _)) = o.get(2) {
                        self.show(bytes, false);
                    }
                }
                "TJ" => {
                    if let Some(Object::Array(items)) = o.first() {
                        self.show_array(items);
                    }
                }
                // An inline image (lopdf reads BI … ID … EI as one `BI`).
                "BI" => self.image_drawn(),
                "Do" => {
                    if depth < MAX_FORM_DEPTH
                        && let Some(name) = o.first().and_then(|n| n.as_name().ok())
                    {
                        self.form(resources, name, depth);
                    }
                }
                _ => {}
            }
        }
    }

    /// An image is drawn in the unit square the current matrix maps: its area on the page
    /// is the matrix's determinant.
    fn image_drawn(&mut self) {
        let [a, b, c, d, _, _] = self.ctm;
        let area = (a * d - b * c).abs();
        if area.is_finite() {
            self.image_area += area;
        }
    }

    fn move_line(&mut self, tx: f32, ty: f32) {
        self.tlm = mul(&[1.0, 0.0, 0.0, 1.0, tx, ty], &self.tlm);
        self.tm = self.tlm;
    }

    fn next_line(&mut self) {
        self.move_line(0.0, -self.text.leading);
    }

    fn font(&mut self, resources: &[&'a Dictionary], name: &[u8]) -> Option<Rc<Font<'a>>> {
        let doc = self.doc;
        for res in resources {
            let Some(fonts) = res.get(b"Font").ok().and_then(|f| deref_dict(doc, f)) else {
                continue;
            };
            let Ok(entry) = fonts.get(name) else { continue };
            return match entry {
                Object::Reference(id) => {
                    if let Some(font) = self.fonts.fonts.get(id) {
                        return Some(font.clone());
                    }
                    let dict = doc.get_dictionary(*id).ok()?;
                    let font = Rc::new(Font::load(doc, dict));
                    self.fonts.fonts.insert(*id, font.clone());
                    Some(font)
                }
                Object::Dictionary(dict) => Some(Rc::new(Font::load(doc, dict))),
                _ => None,
            };
        }
        None
    }

    fn form(&mut self, resources: &[&'a Dictionary], name: &[u8], depth: usize) {
        let doc = self.doc;
        let id = resources.iter().find_map(|res| {
            let xobjects = res.get(b"XObject").ok().and_then(|x| deref_dict(doc, x))?;
            xobjects.get(name).ok()?.as_reference().ok()
        });
        let Some(id) = id else { return };
        if self.forms.contains(&id) {
            return;
        }
        let Ok(Object::Stream(stream)) = doc.get_object(id) else {
            return;
        };
        match stream.dict.get(b"Subtype").and_then(Object::as_name).ok() {
            Some(b"Form") => {}
            Some(b"Image") => return self.image_drawn(),
            _ => return,
        }
        let Ok(content) = stream.get_plain_content_with_limit(MAX_CONTENT_BYTES) else {
            return;
        };
        let own = stream
            .dict
            .get(b"Resources")
            .ok()
            .and_then(|r| deref_dict(doc, r));
        let form_resources: Vec<&'a Dictionary> = match own {
            Some(own) => std::iter::once(own)
                .chain(resources.iter().copied())
                .collect(),
            None => resources.to_vec(),
        };
        let matrix = stream
            .dict
            .get(b"Matrix")
            .ok()
            .and_then(|m| deref(doc, m))
            .and_then(|m| m.as_array().ok())
            .and_then(|m| matrix_from(m))
            .unwrap_or(IDENTITY);
        let saved = (self.ctm, self.text.clone(), self.tm, self.tlm);
        self.ctm = mul(&matrix, &self.ctm);
        self.forms.insert(id);
        self.run(&content, &form_resources, depth + 1);
        self.forms.remove(&id);
        (self.ctm, self.text, self.tm, self.tlm) = saved;
    }

    fn show_array(&mut self, items: &[Object]) {
        let mut gap_space = false;
        let mut first = true;
        for item in items {
            match item {
                Object::String(bytes, _) => {
                    self.show(bytes, !first && gap_space);
                    first = false;
                    gap_space = false;
                }
                other => {
                    let Some(n) = number(other) else { continue };
                    // thousandths of an em, negative moves right
                    let tx = -n / 1000.0 * self.text.size * self.text.scale;
                    self.tm = mul(&[1.0, 0.0, 0.0, 1.0, tx, 0.0], &self.tm);
                    if -n > 180.0 {
                        gap_space = true;
                    }
                }
            }
        }
    }

    /// Shows one string: places it relative to the previous run, appends its text and
    /// advances the text matrix.
    fn show(&mut self, bytes: &[u8], force_space: bool) {
        let trm = mul(&self.tm, &self.ctm);
        let (x, y) = apply(&trm, 0.0, self.text.rise);
        let along = (trm[0], trm[1]);
        let len = (along.0 * along.0 + along.1 * along.1).sqrt();
        let dir = if len > 1e-6 {
            (along.0 / len, along.1 / len)
        } else {
            (1.0, 0.0)
        };
        let vertical = (trm[2] * trm[2] + trm[3] * trm[3]).sqrt();
        let mut size = (self.text.size * vertical).abs();
        if !size.is_finite() || size < 0.1 {
            size = self.text.size.abs().max(1.0);
        }
        let font = self.text.font.clone();
        let text = match &font {
            Some(font) => font.decode(bytes),
            None => bytes.iter().map(|b| char::from(*b)).collect(),
        };
        let widths_known = font.as_ref().is_some_and(|f| f.widths_known);
        let text = clean_glyphs(&text);
        if !text.is_empty() {
            self.place(x, y, dir, size, force_space, widths_known);
            if let Some(line) = self.lines.last_mut() {
                line.text.push_str(&text);
                line.size = line.size.max(size);
            }
        }
        // advance by the glyph widths
        let p = &self.text;
        let mut tx = 0.0;
        let two_byte = font.as_ref().is_some_and(|f| f.two_byte);
        let step = if two_byte { 2 } else { 1 };
        for code in bytes.chunks(step) {
            let code_value = code.iter().fold(0u32, |acc, b| acc * 256 + u32::from(*b));
            let w = match &font {
                Some(font) => font.width(code_value) * font.scale,
                None => 0.5,
            };
            let mut advance = w * p.size + p.char_spacing;
            if !two_byte && code_value == 32 {
                advance += p.word_spacing;
            }
            tx += advance * p.scale;
        }
        if tx.is_finite() {
            self.tm = mul(&[1.0, 0.0, 0.0, 1.0, tx, 0.0], &self.tm);
        }
        if !text.is_empty() {
            let trm = mul(&self.tm, &self.ctm);
            let (ex, ey) = apply(&trm, 0.0, self.text.rise);
            self.last = Some(RunEnd {
                x: ex,
                y: ey,
                dir,
                size,
            });
        }
    }

    /// Starts a new line or adds a space before a run starting at `(x, y)`.
    fn place(
        &mut self,
        x: f32,
        y: f32,
        dir: (f32, f32),
        size: f32,
        force_space: bool,
        widths_known: bool,
    ) {
        let perp = (-dir.1, dir.0);
        let new_line = |lines: &mut Vec<Line>| {
            lines.push(Line {
                text: String::new(),
                y: x * perp.0 + y * perp.1,
                dir,
                size,
            });
        };
        let Some(last) = self.last else {
            new_line(&mut self.lines);
            return;
        };
        if self.lines.is_empty() {
            new_line(&mut self.lines);
            return;
        }
        let (dx, dy) = (x - last.x, y - last.y);
        let same_dir = dir.0 * last.dir.0 + dir.1 * last.dir.1 > 0.95;
        let across = dx * perp.0 + dy * perp.1;
        let along = dx * dir.0 + dy * dir.1;
        let em = size.max(last.size);
        if !same_dir || across.abs() > 0.5 * em {
            new_line(&mut self.lines);
            return;
        }
        let threshold = if widths_known { 0.15 } else { 0.3 };
        let gap = along > threshold * em || along < -1.5 * em;
        if (force_space || gap)
            && let Some(line) = self.lines.last_mut()
            && !line.text.is_empty()
            && !line.text.ends_with(char::is_whitespace)
        {
            line.text.push(' ');
        }
    }
}

/// Drops control characters and spells out Latin ligatures.
fn clean_glyphs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            '\u{a0}' | '\t' => out.push(' '),
            '\u{fffd}' | '\u{feff}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Groups lines into paragraphs by the vertical gaps between them.
fn paragraphs(lines: &[Line]) -> Vec<String> {
    let lines: Vec<&Line> = lines.iter().filter(|l| !l.text.trim().is_empty()).collect();
    // the page's usual line spacing, from the downward gaps between lines of one size
    let mut gaps: Vec<f32> = lines
        .windows(2)
        .filter_map(|w| {
            let gap = w[0].y - w[1].y;
            let same_dir = w[0].dir.0 * w[1].dir.0 + w[0].dir.1 * w[1].dir.1 > 0.95;
            let same_size = (w[0].size - w[1].size).abs() <= 0.15 * w[0].size.max(w[1].size);
            (same_dir && same_size && gap > 0.0 && gap < 3.0 * w[1].size).then_some(gap)
        })
        .collect();
    gaps.sort_by(f32::total_cmp);
    // the lower quartile: pages have more line breaks than paragraph breaks, and a few
    // paragraphs must not make their spacing look usual
    let usual = if gaps.len() >= 3 {
        gaps.get(gaps.len() / 4).copied()
    } else {
        None
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev: Option<&Line> = None;
    for line in lines {
        let text = line.text.trim();
        if let Some(p) = prev {
            let gap = p.y - line.y;
            let same_dir = p.dir.0 * line.dir.0 + p.dir.1 * line.dir.1 > 0.95;
            let size_change = (line.size - p.size).abs() > 0.15 * p.size.max(line.size);
            let wide = match usual {
                Some(usual) => gap > usual * 1.3 + 0.1 * line.size,
                None => gap > 1.6 * line.size,
            };
            let breaks = !same_dir || gap < -0.5 * line.size || wide || size_change;
            if breaks {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            } else {
                current.push('\n');
            }
        }
        current.push_str(text);
        prev = Some(line);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, y: f32, size: f32) -> Line {
        Line {
            text: text.into(),
            y,
            dir: (1.0, 0.0),
            size,
        }
    }

    #[test]
    fn paragraphs_follow_gaps_and_sizes() {
        let lines = vec![
            line("Title", 760.0, 18.0),
            line("first line", 730.0, 12.0),
            line("second line", 716.0, 12.0),
            line("third line", 702.0, 12.0),
            line("new paragraph", 678.0, 12.0),
            line("continues", 664.0, 12.0),
        ];
        assert_eq!(
            paragraphs(&lines),
            vec![
                "Title".to_string(),
                "first line\nsecond line\nthird line".to_string(),
                "new paragraph\ncontinues".to_string(),
            ]
        );
    }

    #[test]
    fn matrices_compose() {
        let translate = [1.0, 0.0, 0.0, 1.0, 10.0, 20.0];
        let scale = [2.0, 0.0, 0.0, 2.0, 0.0, 0.0];
        assert_eq!(apply(&mul(&translate, &scale), 1.0, 1.0), (22.0, 42.0));
        assert_eq!(clean_glyphs("e\u{fb03}cient\u{0}"), "efficient");
    }
}
