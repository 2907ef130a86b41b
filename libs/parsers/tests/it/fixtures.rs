//! Small real files built in memory: PDFs with lopdf, OOXML packages as zips of parts.

use std::io::{Cursor, Write};

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use zip::write::SimpleFileOptions;

/// A PDF whose pages hold the given text: paragraphs separated by a blank line, lines by
/// `\n`; a line starting with `# ` is set in 18 pt. Fonts are inherited from the page
/// tree, streams are compressed, and the information dictionary has `title`.
pub fn pdf(title: Option<&str>, pages: &[&str]) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let mut kids = Vec::new();
    for page in pages {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("TL", vec![14.into()]),
            Operation::new("Td", vec![72.into(), 750.into()]),
        ];
        for (i, para) in page.split("\n\n").enumerate() {
            if para.trim().is_empty() {
                continue;
            }
            if i > 0 {
                // paragraph spacing
                ops.push(Operation::new("Td", vec![0.into(), (-10).into()]));
            }
            for line in para.lines() {
                if let Some(heading) = line.strip_prefix("# ") {
                    ops.push(Operation::new("Tf", vec!["F1".into(), 18.into()]));
                    ops.push(Operation::new("Tj", vec![Object::string_literal(heading)]));
                    ops.push(Operation::new("Tf", vec!["F1".into(), 12.into()]));
                    ops.push(Operation::new("Td", vec![0.into(), (-24).into()]));
                } else {
                    ops.push(Operation::new("Tj", vec![Object::string_literal(line)]));
                    ops.push(Operation::new("T*", vec![]));
                }
            }
        }
        ops.push(Operation::new("ET", vec![]));
        kids.push(add_page(&mut doc, pages_id, ops, None));
    }
    finish_pdf(doc, pages_id, font_id, kids, title)
}

/// A page with its content stream and optional own resources.
pub fn add_page(
    doc: &mut Document,
    pages_id: lopdf::ObjectId,
    ops: Vec<Operation>,
    resources: Option<lopdf::Dictionary>,
) -> Object {
    let content = Content { operations: ops };
    let mut stream = Stream::new(dictionary! {}, content.encode().unwrap());
    stream.compress().unwrap();
    let content_id = doc.add_object(stream);
    let mut page = dictionary! {
        "Type" => "Page",
        "Parent" => pages_id,
        "Contents" => content_id,
    };
    if let Some(resources) = resources {
        page.set("Resources", resources);
    }
    doc.add_object(page).into()
}

/// Writes the page tree (fonts inherited from it), catalog and info dictionary.
pub fn finish_pdf(
    mut doc: Document,
    pages_id: lopdf::ObjectId,
    font_id: lopdf::ObjectId,
    kids: Vec<Object>,
    title: Option<&str>,
) -> Vec<u8> {
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => count,
            "Resources" => dictionary! { "Font" => dictionary! { "F1" => font_id } },
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    if let Some(title) = title {
        let info_id = doc.add_object(dictionary! { "Title" => Object::string_literal(title) });
        doc.trailer.set("Info", info_id);
    }
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A four-page PDF that exercises kerning arrays, positioned words, a form XObject, a
/// page without text and a composite (two-byte, ToUnicode) font.
pub fn layout_pdf() -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
    });
    let page1 = vec![
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F1".into(), 12.into()]),
        Operation::new("Td", vec![72.into(), 700.into()]),
        Operation::new(
            "TJ",
            vec![Object::Array(vec![
                Object::string_literal("Kerned"),
                (-300).into(),
                Object::string_literal("words"),
                40.into(),
                Object::string_literal("!"),
            ])],
        ),
        Operation::new("Td", vec![0.into(), (-14).into()]),
        Operation::new("Tj", vec![Object::string_literal("Left")]),
        Operation::new("Td", vec![150.into(), 0.into()]),
        Operation::new("Tj", vec![Object::string_literal("Right")]),
        Operation::new("ET", vec![]),
        Operation::new("Do", vec!["X1".into()]),
    ];
    let form_content = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Td", vec![72.into(), 400.into()]),
            Operation::new("Tj", vec![Object::string_literal("Text drawn by a form")]),
            Operation::new("ET", vec![]),
        ],
    };
    let form_id = doc.add_object(Stream::new(
        dictionary! {
            "Type" => "XObject",
            "Subtype" => "Form",
            "BBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        },
        form_content.encode().unwrap(),
    ));
    let resources = dictionary! {
        "Font" => dictionary! { "F1" => font_id },
        "XObject" => dictionary! { "X1" => form_id },
    };
    let mut kids = vec![add_page(&mut doc, pages_id, page1, Some(resources))];
    kids.push(add_page(&mut doc, pages_id, vec![], None));
    let page3 = vec![
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F1".into(), 10.into()]),
        Operation::new("Td", vec![72.into(), 700.into()]),
        Operation::new(
            "Tj",
            vec![Object::string_literal("Last page (with parentheses)")],
        ),
        Operation::new("ET", vec![]),
    ];
    kids.push(add_page(&mut doc, pages_id, page3, None));
    // a composite font with two-byte codes, as office suites and browsers write them
    let cmap = "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n6 beginbfchar\n<0001> <0048>\n<0002> <0069>\n<0003> <0020>\n<0004> <0043>\n<0005> <0049>\n<0006> <0044>\nendbfchar\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n";
    let to_unicode = doc.add_object(Stream::new(dictionary! {}, cmap.as_bytes().to_vec()));
    let descendant = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "CIDFontType2",
        "BaseFont" => "Embedded",
        "DW" => 1000,
        "W" => vec![1.into(), vec![700.into(), 300.into(), 250.into()].into(), 4.into(), 6.into(), 700.into()],
    });
    let type0 = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type0",
        "BaseFont" => "Embedded",
        "Encoding" => "Identity-H",
        "DescendantFonts" => vec![descendant.into()],
        "ToUnicode" => to_unicode,
    });
    let page4 = vec![
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F2".into(), 20.into()]),
        Operation::new(
            "Tm",
            vec![
                1.into(),
                0.into(),
                0.into(),
                1.into(),
                72.into(),
                700.into(),
            ],
        ),
        Operation::new(
            "Tj",
            vec![Object::String(
                vec![0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6],
                lopdf::StringFormat::Hexadecimal,
            )],
        ),
        // "Hi CID" is 3.35 em wide at 20 pt: a run starting right after it continues the word
        Operation::new(
            "Tm",
            vec![
                1.into(),
                0.into(),
                0.into(),
                1.into(),
                139.into(),
                700.into(),
            ],
        ),
        Operation::new(
            "Tj",
            vec![Object::String(vec![0, 6], lopdf::StringFormat::Hexadecimal)],
        ),
        Operation::new(
            "Tm",
            vec![
                1.into(),
                0.into(),
                0.into(),
                1.into(),
                200.into(),
                700.into(),
            ],
        ),
        Operation::new(
            "Tj",
            vec![Object::String(
                vec![0, 1, 0, 2],
                lopdf::StringFormat::Hexadecimal,
            )],
        ),
        Operation::new("ET", vec![]),
    ];
    let resources = dictionary! { "Font" => dictionary! { "F2" => type0 } };
    kids.push(add_page(&mut doc, pages_id, page4, Some(resources)));
    finish_pdf(doc, pages_id, font_id, kids, None)
}

/// A zip of `(name, content)` parts, deflated.
pub fn zip_parts(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in parts {
        writer.start_file(*name, options).unwrap();
        writer.write_all(content.as_bytes()).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape""#;

/// A Word document: title, two heading levels, a list, a table, tracked changes, a text
/// box written twice (preferred and fallback), and a hard page break.
pub fn docx() -> Vec<u8> {
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W}><w:body>
<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Quarterly Report</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Sales grew </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>strongly</w:t></w:r><w:del><w:r><w:delText>badly</w:delText></w:r></w:del><w:r><w:t xml:space="preserve"> in Q3 &amp; Q4.</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Kop2"/></w:pPr><w:r><w:t>Setup</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>Install the tool</w:t></w:r></w:p>
<w:p><w:r><w:t>Name</w:t><w:tab/><w:t>Value</w:t><w:br/><w:t>second line</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Revenue</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>North</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>120</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>Boxed note</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>Boxed note</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>
<w:p><w:r><w:t>Before the break.</w:t></w:r><w:r><w:br w:type="page"/></w:r><w:r><w:lastRenderedPageBreak/><w:t>After the break.</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Outlook</w:t></w:r></w:p>
<w:p><w:r><w:t>Next year looks good.</w:t></w:r></w:p>
<w:sectPr/></w:body></w:document>"#
    );
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<w:styles {W}>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="Kop2"><w:name w:val="heading 2"/></w:style>
</w:styles>"#
    );
    zip_parts(&[
        ("[Content_Types].xml", CONTENT_TYPES),
        ("_rels/.rels", &package_rels("word/document.xml")),
        ("word/document.xml", &document),
        ("word/styles.xml", &styles),
        ("docProps/core.xml", &core("Q3 Report")),
    ])
}

const CONTENT_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/></Types>"#;

fn package_rels(main: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="{main}"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>"#
    )
}

fn core(title: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></cp:coreProperties>"#
    )
}

const P: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;

fn slide_xml(title: &str, body: &[&str], extra: &str) -> String {
    let paras: String = body
        .iter()
        .map(|b| format!("<a:p><a:r><a:t>{b}</a:t></a:r></a:p>"))
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:sld {P}><p:cSld><p:spTree>
<p:sp><p:nvSpPr><p:cNvPr id="2" name="Body"/><p:cNvSpPr/><p:nvPr><p:ph idx="1"/></p:nvPr></p:nvSpPr><p:txBody>{paras}</p:txBody></p:sp>
<p:sp><p:nvSpPr><p:cNvPr id="1" name="Title"/><p:cNvSpPr/><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>{title}</a:t></a:r></a:p></p:txBody></p:sp>
<p:sp><p:nvSpPr><p:cNvPr id="3" name="Num"/><p:cNvSpPr/><p:nvPr><p:ph type="sldNum"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:fld type="slidenum"><a:t>99</a:t></a:fld></a:p></p:txBody></p:sp>
{extra}</p:spTree></p:cSld></p:sld>"#
    )
}

/// A presentation whose slide files are numbered against their order: slide2.xml is
/// shown first. The first slide has speaker notes, the second a table.
pub fn pptx() -> Vec<u8> {
    let presentation = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:presentation {P}><p:sldIdLst><p:sldId id="256" r:id="rId7"/><p:sldId id="257" r:id="rId8"/></p:sldIdLst></p:presentation>"#
    );
    let rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId8" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide1.xml"/><Relationship Id="rId7" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide2.xml"/></Relationships>"#;
    let first = slide_xml("Welcome", &["Agenda for today", "Q&amp;A at the end"], "");
    let table = r#"<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Plan</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>Price</a:t></a:r></a:p></a:txBody></a:tc></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Pro</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>10 USD</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#;
    let second = slide_xml("Pricing", &["Two plans"], table);
    let slide2_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>"#;
    let notes = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:notes {P}><p:cSld><p:spTree>
<p:sp><p:nvSpPr><p:cNvPr id="2" name="Image"/><p:cNvSpPr/><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr></p:sp>
<p:sp><p:nvSpPr><p:cNvPr id="3" name="Notes"/><p:cNvSpPr/><p:nvPr><p:ph type="body" idx="1"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>Remember to smile</a:t></a:r></a:p></p:txBody></p:sp>
</p:spTree></p:cSld></p:notes>"#
    );
    zip_parts(&[
        ("[Content_Types].xml", CONTENT_TYPES),
        ("_rels/.rels", &package_rels("ppt/presentation.xml")),
        ("ppt/presentation.xml", &presentation),
        ("ppt/_rels/presentation.xml.rels", rels),
        ("ppt/slides/slide1.xml", &second),
        ("ppt/slides/slide2.xml", &first),
        ("ppt/slides/_rels/slide2.xml.rels", slide2_rels),
        ("ppt/notesSlides/notesSlide1.xml", &notes),
    ])
}

/// A workbook with two sheets: "Sales" (header row, shared and inline strings, numbers,
/// a date) and "Notes".
pub fn xlsx() -> Vec<u8> {
    let workbook = r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sales" sheetId="1" r:id="rId1"/><sheet name="Notes" sheetId="2" r:id="rId2"/></sheets></workbook>"#;
    let rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet2.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rId4" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>"#;
    let shared = r#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="5" uniqueCount="5"><si><t>Region</t></si><si><t>Revenue</t></si><si><t>Date</t></si><si><t>North</t></si><si><t>South</t></si></sst>"#;
    let styles = r#"<?xml version="1.0" encoding="UTF-8"?><styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="14" applyNumberFormat="1"/></cellXfs></styleSheet>"#;
    let sheet1 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>
<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c></row>
<row r="2"><c r="A2" t="s"><v>3</v></c><c r="B2"><v>1200.5</v></c><c r="C2" s="1"><v>45292</v></c></row>
<row r="4"><c r="A4" t="s"><v>4</v></c><c r="B4"><v>800</v></c></row>
</sheetData></worksheet>"#;
    let sheet2 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>
<row r="1"><c r="A1" t="inlineStr"><is><t>Remarks</t></is></c></row>
<row r="2"><c r="A2" t="inlineStr"><is><t>Targets met</t></is></c></row>
</sheetData></worksheet>"#;
    zip_parts(&[
        ("[Content_Types].xml", CONTENT_TYPES),
        ("_rels/.rels", &package_rels("xl/workbook.xml")),
        ("xl/workbook.xml", workbook),
        ("xl/_rels/workbook.xml.rels", rels),
        ("xl/sharedStrings.xml", shared),
        ("xl/styles.xml", styles),
        ("xl/worksheets/sheet1.xml", sheet1),
        ("xl/worksheets/sheet2.xml", sheet2),
        ("docProps/core.xml", &core("Sales 2024")),
    ])
}

/// `pdf(None, pages)` encrypted (RC4, 128 bits) with `user_password`.
pub fn encrypted_pdf(user_password: &str, pages: &[&str]) -> Vec<u8> {
    let mut doc = Document::load_mem(&pdf(None, pages)).unwrap();
    doc.trailer.set(
        "ID",
        vec![
            Object::string_literal(b"0123456789abcdef".to_vec()),
            Object::string_literal(b"0123456789abcdef".to_vec()),
        ],
    );
    let version = lopdf::EncryptionVersion::V2 {
        document: &doc,
        owner_password: "owner",
        user_password,
        key_length: 128,
        permissions: lopdf::Permissions::all(),
    };
    let state = lopdf::EncryptionState::try_from(version).unwrap();
    doc.encrypt(&state).unwrap();
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}
