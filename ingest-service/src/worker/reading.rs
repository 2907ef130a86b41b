//! Text recognition in the pipeline: the scanned pages of a PDF (or all its pages, when the
//! upload forces it) and images go through [`crate::ocr`], page by page; what each page was
//! read from is kept with the document, and pages that could not be read are named in the
//! document's message and the job's errors instead of failing the document, as long as
//! some text was read.

use std::collections::BTreeMap;

use docchat_common::error::{ApiError, ApiResult};
use docchat_parsers::{DocumentKind, Page, ParsedDocument};

use super::Workers;
use crate::jobs::IngestParams;
use crate::jobs::OcrMode;

/// How a document's pages were read, when some needed recognition.
#[derive(Debug, Default)]
pub(super) struct Reading {
    /// Page number → `text` (its text layer), `tesseract` (recognized) or `failed`.
    pub(super) sources: BTreeMap<u32, &'static str>,
    /// The pages that could not be read, and why.
    pub(super) failed: Vec<(u32, String)>,
}

impl Reading {
    /// The document's message: which pages could not be read, and why; `None` when all were.
    pub(super) fn message(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let pages: Vec<String> = self.failed.iter().map(|(n, _)| n.to_string()).collect();
        let whys: Vec<String> = self
            .failed
            .iter()
            .take(5)
            .map(|(n, why)| format!("page {n}: {why}"))
            .collect();
        let more = if self.failed.len() > 5 { "; …" } else { "" };
        Some(format!(
            "{} of {} pages could not be read (pages {}): {}{more}",
            self.failed.len(),
            self.sources.len(),
            pages.join(", "),
            whys.join("; ")
        ))
    }

    /// One job error line per page not read.
    pub(super) fn notes(&self) -> Vec<String> {
        self.failed
            .iter()
            .map(|(n, why)| format!("page {n} could not be read: {why}"))
            .collect()
    }

    /// The `page_sources` column.
    pub(super) fn sources_json(&self) -> String {
        let map: BTreeMap<String, &str> = self
            .sources
            .iter()
            .map(|(n, s)| (n.to_string(), *s))
            .collect();
        serde_json::to_string(&map).unwrap_or_else(|_| "{}".into())
    }
}

impl Workers {
    /// An image upload: its frames recognized, a page each.
    ///
    /// # Errors
    ///
    /// Recognition off or unavailable, the image unreadable (a decoder's refusal, a limit),
    /// or no text in it: the job fails saying so.
    pub(super) async fn read_image(
        &self,
        owner: &str,
        params: &IngestParams,
        filename: &str,
        bytes: &[u8],
    ) -> ApiResult<(ParsedDocument, Reading)> {
        if params.ocr == OcrMode::Off {
            return Err(ApiError::bad_request(format!(
                "{filename} is an image, whose text only text recognition reads, and it was \
                 turned off for this upload (ocr_model=off)"
            )));
        }
        if let Some(why) = self.ocr.unavailable() {
            return Err(ApiError::bad_request(format!(
                "{filename} is an image, and {why}"
            )));
        }
        let language = self.language(params)?;
        let extension = docchat_parsers::extension(filename).unwrap_or_default();
        let pages = self
            .ocr
            .image(owner, bytes, &extension, &language)
            .await
            .map_err(|why| {
                ApiError::bad_request(format!("{filename}: its text could not be read: {why}"))
            })?;
        let parsed = ParsedDocument::recognized(DocumentKind::Image, &pages);
        if parsed.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{filename}: no text was recognized in the image"
            )));
        }
        let reading = Reading {
            sources: (1..=parsed.page_count).map(|n| (n, "tesseract")).collect(),
            failed: Vec::new(),
        };
        Ok((parsed, reading))
    }

    /// A parsed PDF's scanned pages (all its pages when the upload forces recognition)
    /// recognized, `progress` called with the share read; other documents come back as
    /// they are. `None`: no page needed recognition.
    ///
    /// # Errors
    ///
    /// No text at all once the pages are read (every page scanned and none readable).
    pub(super) async fn read_scans(
        &self,
        owner: &str,
        params: &IngestParams,
        filename: &str,
        bytes: &[u8],
        mut parsed: ParsedDocument,
        progress: impl Fn(f64) + Send + Sync,
    ) -> ApiResult<(ParsedDocument, Option<Reading>)> {
        if parsed.kind != DocumentKind::Pdf {
            return Ok((parsed, None));
        }
        let wanted: Vec<u32> = match params.ocr {
            OcrMode::Off => Vec::new(),
            OcrMode::Auto => parsed.scanned.clone(),
            OcrMode::Force => parsed.pages.iter().map(|p| p.number).collect(),
        };
        if wanted.is_empty() {
            if parsed.is_empty() && !parsed.scanned.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "{filename} has only scanned pages, whose text only text recognition \
                     reads, and it was turned off for this upload (ocr_model=off)"
                )));
            }
            return Ok((parsed, None));
        }
        let results = match self.ocr.unavailable() {
            Some(why) => wanted
                .iter()
                .map(|n| (*n, Err(why.to_owned().into())))
                .collect(),
            None => {
                let language = self.language(params)?;
                let pages: Vec<(u32, (f32, f32))> = wanted
                    .iter()
                    .map(|n| {
                        let size = usize::try_from(*n - 1)
                            .ok()
                            .and_then(|i| parsed.page_sizes.get(i))
                            .copied()
                            .unwrap_or((612.0, 792.0));
                        (*n, size)
                    })
                    .collect();
                let total = pages.len() as f64;
                self.ocr
                    .pdf_pages(owner, bytes, &pages, &language, |done| {
                        progress(done as f64 / total)
                    })
                    .await
            }
        };
        let reading = merge(&mut parsed, results, params.ocr == OcrMode::Force);
        if parsed.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{filename}: no text could be read from its pages{}",
                reading
                    .message()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )));
        }
        Ok((parsed, Some(reading)))
    }

    /// The upload's recognition languages (checked when it was queued; checked again here,
    /// since this replica may have others installed).
    fn language(&self, params: &IngestParams) -> ApiResult<String> {
        self.ocr
            .language(&params.ocr_language)
            .map_err(ApiError::bad_request)
    }
}

/// Puts the recognized pages into `parsed`: a page read replaces its text layer (unless it
/// held no text and recognition was not forced: a blank image keeps what the layer had),
/// a page that failed keeps its text layer, if any, and is recorded with why.
fn merge(
    parsed: &mut ParsedDocument,
    results: Vec<(u32, crate::ocr::PageText)>,
    forced: bool,
) -> Reading {
    let mut reading = Reading {
        sources: parsed.pages.iter().map(|p| (p.number, "text")).collect(),
        failed: Vec::new(),
    };
    for (number, text) in results {
        let Some(page) = usize::try_from(number.saturating_sub(1))
            .ok()
            .and_then(|i| parsed.pages.get_mut(i))
        else {
            continue;
        };
        match text {
            Ok(text) => {
                let read = Page::recognized(number, &text);
                if !read.blocks.is_empty() || forced {
                    *page = read;
                }
                reading.sources.insert(number, "tesseract");
            }
            Err(why) => {
                reading.sources.insert(number, "failed");
                reading.failed.push((number, why.why));
            }
        }
    }
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_pages_not_read_and_why() {
        let reading = Reading {
            sources: [(1, "text"), (2, "failed"), (3, "tesseract"), (4, "failed")]
                .into_iter()
                .collect(),
            failed: vec![
                (2, "rendering took longer than 120 s".into()),
                (4, "recognizing failed: bad image".into()),
            ],
        };
        assert_eq!(
            reading.message().as_deref(),
            Some(
                "2 of 4 pages could not be read (pages 2, 4): page 2: rendering took longer than 120 s; page 4: recognizing failed: bad image"
            )
        );
        assert_eq!(
            reading.notes()[1],
            "page 4 could not be read: recognizing failed: bad image"
        );
        assert_eq!(
            reading.sources_json(),
            r#"{"1":"text","2":"failed","3":"tesseract","4":"failed"}"#
        );
        assert_eq!(Reading::default().message(), None);
    }

    fn pdf(pages: &[&str]) -> ParsedDocument {
        let texts: Vec<String> = pages.iter().map(|p| (*p).to_owned()).collect();
        ParsedDocument {
            kind: DocumentKind::Pdf,
            ..ParsedDocument::recognized(DocumentKind::Pdf, &texts)
        }
    }

    #[test]
    fn a_page_that_fails_is_recorded_and_the_others_are_read() {
        // Page 1 has a text layer; 2 and 3 are scans; 3's rendering ran out of time.
        let mut parsed = pdf(&["The ferry timetable.", "", ""]);
        let reading = merge(
            &mut parsed,
            vec![
                (
                    2,
                    Ok("The harbour master\nsigns in green ink.\n\nSecond paragraph.\n".into()),
                ),
                (
                    3,
                    Err("rendering the page took longer than 120 s"
                        .to_owned()
                        .into()),
                ),
            ],
            false,
        );
        assert_eq!(parsed.pages[0].text(), "The ferry timetable.");
        assert_eq!(
            parsed.pages[1].text(),
            "The harbour master\nsigns in green ink.\n\nSecond paragraph."
        );
        assert!(parsed.pages[2].blocks.is_empty());
        assert_eq!(
            reading.sources_json(),
            r#"{"1":"text","2":"tesseract","3":"failed"}"#
        );
        assert_eq!(
            reading.failed,
            vec![(3, "rendering the page took longer than 120 s".to_owned())]
        );
        assert!(
            reading
                .message()
                .unwrap()
                .starts_with("1 of 3 pages could not be read (pages 3)")
        );
    }

    #[test]
    fn a_blank_recognition_keeps_the_text_layer_unless_forced() {
        let mut parsed = pdf(&["Stamp: scanned by a copier"]);
        merge(&mut parsed, vec![(1, Ok("  \n".into()))], false);
        assert_eq!(parsed.pages[0].text(), "Stamp: scanned by a copier");
        let mut parsed = pdf(&["garbled layer"]);
        merge(&mut parsed, vec![(1, Ok("".into()))], true);
        assert!(
            parsed.is_empty(),
            "forced: the recognition is what the page says"
        );
        // A page number the document does not have is ignored.
        let reading = merge(&mut parsed, vec![(9, Ok("x".into()))], false);
        assert_eq!(reading.sources.len(), 1);
    }
}
