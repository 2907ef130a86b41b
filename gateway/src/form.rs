//! multipart/form-data bodies, read one way by every route that takes one (uploads, custom
//! tools, custom agents): the whole body counts against `DOCCHAT_MAX_BODY_BYTES` whether or
//! not its length is declared, a file part is read up to its own limit and no further, a text
//! part up to 1 MB, and every failure is a `{code, message}` with SPEC.md's fixed texts.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use actix_multipart::{Field, Multipart, MultipartError};
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpRequest, web};
use docchat_common::error::{ApiError, ErrorCode};
use futures::StreamExt;

use crate::error::{HttpError, bad_request};

/// SPEC.md's limit of an uploaded tool or agent file.
pub const MAX_FILE: usize = 20 * 1024 * 1024;
pub const FILE_TOO_LARGE: &str = "File is too large, maximum size is 20MB";
pub const BAD_FORM: &str = "Failed to parse form data.";
pub const NO_FILE: &str = "The request does not contain a file.";
/// The largest text part (tool_args, agent_args, …).
const MAX_TEXT: usize = 1 << 20;

/// A multipart/form-data body, part by part.
pub struct FormReader {
    parts: Multipart,
    /// Set when the body passed `max_body` (a parse failure is then a 413).
    over: Rc<Cell<bool>>,
    max_body: usize,
}

impl FormReader {
    /// `payload` as multipart/form-data: 400 when it is not one, 413 when its declared
    /// length is over `max_body` (an undeclared length is counted as it arrives).
    pub fn open(
        req: &HttpRequest,
        payload: web::Payload,
        max_body: usize,
    ) -> Result<FormReader, HttpError> {
        let multipart = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/form-data"));
        if !multipart {
            return Err(bad_request(BAD_FORM));
        }
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > max_body) {
            return Err(body_too_large(max_body));
        }
        let over = Rc::new(Cell::new(false));
        Ok(FormReader {
            parts: Multipart::new(req.headers(), limited(payload, max_body, over.clone())),
            over,
            max_body,
        })
    }

    /// The next part, or `None` after the last.
    pub async fn next(&mut self) -> Result<Option<Field>, HttpError> {
        match self.parts.next().await {
            None => Ok(None),
            Some(field) => field.map(Some).map_err(|e| self.error(e)),
        }
    }

    /// What a failure to read the body answers: 413 past the body limit, else 400.
    pub fn error(&self, e: MultipartError) -> HttpError {
        if self.over.get() {
            body_too_large(self.max_body)
        } else {
            tracing::debug!(error = %e, "unreadable form");
            bad_request(BAD_FORM)
        }
    }

    /// A part's bytes, or [`FILE_TOO_LARGE`] (413) past `max`.
    pub async fn bytes(&self, field: &mut Field, max: usize) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Some(chunk) = field.next().await {
            let chunk = chunk.map_err(|e| self.error(e))?;
            if out.len() + chunk.len() > max {
                return Err(HttpError(ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    FILE_TOO_LARGE,
                )));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// A text part (UTF-8, at most 1 MB).
    pub async fn text(&self, field: &mut Field) -> Result<String, HttpError> {
        let mut out = Vec::new();
        while let Some(chunk) = field.next().await {
            let chunk = chunk.map_err(|e| self.error(e))?;
            if out.len() + chunk.len() > MAX_TEXT {
                return Err(bad_request(
                    "A form field other than file is larger than 1 MB.",
                ));
            }
            out.extend_from_slice(&chunk);
        }
        String::from_utf8(out).map_err(|_| bad_request(BAD_FORM))
    }

    /// Reads past a part that is not ours to keep.
    pub async fn skip(&self, field: &mut Field) -> Result<(), HttpError> {
        while let Some(chunk) = field.next().await {
            chunk.map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// The whole form: its text parts by name and its `file` part (up to `max_file`).
    pub async fn read_all(mut self, max_file: usize) -> Result<Form, HttpError> {
        let mut form = Form::default();
        while let Some(mut field) = self.next().await? {
            let name = field.name().unwrap_or_default().to_owned();
            if name == "file" {
                let file_name = file_name(&field);
                let data = self.bytes(&mut field, max_file).await?;
                form.file = Some((file_name, data));
            } else {
                let text = self.text(&mut field).await?;
                form.texts.insert(name, text);
            }
        }
        Ok(form)
    }
}

/// A form read whole.
#[derive(Default)]
pub struct Form {
    pub texts: HashMap<String, String>,
    /// The `file` part: its file name and bytes.
    pub file: Option<(String, Vec<u8>)>,
}

/// The file name a part declares (empty without one).
pub fn file_name(field: &Field) -> String {
    field
        .content_disposition()
        .and_then(|cd| cd.get_filename())
        .unwrap_or_default()
        .to_owned()
}

fn body_too_large(max: usize) -> HttpError {
    HttpError(ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request body is larger than {} MB", max / 1_000_000),
    ))
}

/// `body` as it arrives, failing with `Overflow` (and setting `over`) past `max` bytes.
fn limited(
    body: web::Payload,
    max: usize,
    over: Rc<Cell<bool>>,
) -> impl futures::Stream<Item = Result<web::Bytes, PayloadError>> + 'static {
    let mut total = 0usize;
    body.map(move |chunk| {
        let chunk = chunk?;
        total = total.saturating_add(chunk.len());
        if total > max {
            over.set(true);
            return Err(PayloadError::Overflow);
        }
        Ok(chunk)
    })
}
