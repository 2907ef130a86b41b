//! `GET /file?id=&name=`: agent file download (SPEC.md, outside /api/v1). The id is a
//! document's (from an agent_files metadata entry); only its owner downloads it. The bytes
//! stream from ingest-service's blob store (ReadDocumentBytes) to the client as they come,
//! never held whole.

use actix_web::body::SizedStream;
use actix_web::http::header::{
    Charset, ContentDisposition, DispositionParam, DispositionType, ExtendedValue,
};
use actix_web::web::Bytes;
use actix_web::{HttpResponse, get, web};
use docchat_common::error::ApiError;
use docchat_proto::ingest::v1 as pb;
use docchat_proto::ingest::v1::document_bytes::Part;
use futures::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult, bad_request};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(download_file);
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct FileQuery {
    /// The document id from an agent file's metadata.
    pub id: String,
    /// The file name (URL-encoded); informative: the download is named after the document.
    pub name: Option<String>,
}

/// The name a download is saved as: the last component of the document's workspace path.
fn file_name(document_name: &str) -> &str {
    document_name
        .rsplit('/')
        .find(|s| !s.is_empty())
        .unwrap_or("file")
}

/// `attachment` with the name twice (RFC 6266): `filename` as ASCII (other characters
/// `_`), and `filename*` as UTF-8 (RFC 5987) for clients that read it.
pub(crate) fn attachment(name: &str) -> ContentDisposition {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    ContentDisposition {
        disposition: DispositionType::Attachment,
        parameters: vec![
            DispositionParam::Filename(ascii),
            DispositionParam::FilenameExt(ExtendedValue {
                charset: Charset::Ext("UTF-8".to_owned()),
                language_tag: None,
                value: name.as_bytes().to_vec(),
            }),
        ],
    }
}

#[utoipa::path(tag = "Agent Files", params(FileQuery),
    responses(
        (status = 200, description = "the file's bytes, as an attachment named after the file; Content-Type from its extension (application/octet-stream when unknown)",
            content_type = "*/*"),
        (status = 400, description = "no id, or an empty one", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "no file with this id that the caller owns", body = ErrorBody),
    ),
    security(("bearer" = [])))]
#[get("/file")]
pub async fn download_file(api: Api, query: web::Query<FileQuery>) -> HttpResult<HttpResponse> {
    // A missing id is the query extractor's 400; an empty one is ours.
    let FileQuery { id, name: _ } = query.into_inner();
    if id.trim().is_empty() {
        return Err(bad_request(
            "id must not be empty: the document id of the file",
        ));
    }
    let request = pb::ReadDocumentBytesRequest {
        id,
        owned_only: true,
    };
    let mut parts = api
        .ingest()
        .read_document_bytes(request)
        .await?
        .into_inner();
    let Some(pb::DocumentBytes {
        part: Some(Part::Document(doc)),
    }) = parts.message().await?
    else {
        return Err(
            ApiError::internal("downloading a file", "the stream lacked its document").into(),
        );
    };
    let name = file_name(&doc.name);
    let bytes = parts.filter_map(|part| async move {
        match part {
            Ok(pb::DocumentBytes {
                part: Some(Part::Data(data)),
            }) => Some(Ok(Bytes::from(data))),
            Ok(_) => None,
            Err(status) => {
                tracing::warn!(code = ?status.code(), message = status.message(), "a file download broke off");
                Some(Err(status))
            }
        }
    });
    let mut response = HttpResponse::Ok();
    response
        .content_type(mime_guess::from_path(name).first_or_octet_stream().as_ref())
        .insert_header(attachment(name))
        .insert_header(("x-content-type-options", "nosniff"));
    Ok(match u64::try_from(doc.size) {
        Ok(size) => response.body(SizedStream::new(size, bytes)),
        Err(_) => response.streaming(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::{attachment, file_name};

    #[test]
    fn downloads_are_named_after_the_last_path_component() {
        assert_eq!(file_name("out/charts/sales.png"), "sales.png");
        assert_eq!(file_name("plain.txt"), "plain.txt");
        let header = attachment("résumé \"final\".pdf").to_string();
        assert_eq!(
            header,
            "attachment; filename=\"r_sum_ _final_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf"
        );
    }
}
