//! /api/v1/uploads: files stream from the multipart body into ingest-service's blob store
//! (client-streaming gRPC) without ever being held whole; ingestion is queued from there.

use actix_web::{HttpRequest, HttpResponse, post, put, web};
use docchat_proto::ingest::v1 as pb;
use docchat_proto::ingest::v1::upload_chunk::Part;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::comma_list;
use super::jobs::{JobDetails, ingest_details};

use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult, bad_request};
use crate::form::{self, FormReader};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UploadedFile {
    pub id: String,
    pub filename: String,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(upload_file)
        .service(ingest_upload)
        .service(ingest_upload_job);
}

#[utoipa::path(
    tag = "Document Ingestion",
    request_body(content_type = "multipart/form-data", description = "a part named `file`"),
    responses((status = 200, body = UploadedFile), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/uploads")]
pub async fn upload_file(
    api: Api,
    req: HttpRequest,
    body: web::Payload,
) -> HttpResult<HttpResponse> {
    let uploaded = receive(&api, &req, body).await?;
    Ok(HttpResponse::Ok().json(UploadedFile {
        id: uploaded.id,
        filename: uploaded.filename,
    }))
}

/// Streams the multipart body's part named `file` into ingest-service as a new upload of the
/// caller's (other parts are read past and dropped). Shared by `PUT /api/v1/uploads` and the
/// client's `PUT /rpc/fs`: one store, one limit (SPEC.md: the HTTP body size, also when the
/// length is not declared), one set of checks.
pub(crate) async fn receive(
    api: &Api,
    req: &HttpRequest,
    body: web::Payload,
) -> HttpResult<pb::UploadedFile> {
    let mut form = FormReader::open(req, body, api.state().config.max_body_bytes)?;
    while let Some(mut field) = form.next().await? {
        if field.name() != Some("file") {
            // Other parts are not ours to keep.
            form.skip(&mut field).await?;
            continue;
        }
        let filename = form::file_name(&field);
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::UploadChunk>(16);
        let chunks = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut client = api.ingest();
        let form = &form;
        let send = async move {
            let meta = pb::UploadChunk {
                part: Some(Part::Meta(pb::UploadMeta { filename })),
            };
            if tx.send(meta).await.is_err() {
                return Ok(());
            }
            while let Some(chunk) = field.next().await {
                let bytes = chunk.map_err(|e| form.error(e))?;
                let part = pb::UploadChunk {
                    part: Some(Part::Data(bytes.to_vec())),
                };
                if tx.send(part).await.is_err() {
                    // The service gave up (and says why in its answer).
                    return Ok(());
                }
            }
            Ok::<(), HttpError>(())
        };
        // A refused body (over the limit, malformed) ends the call at once: dropping the
        // upload resets its stream, so ingest-service keeps nothing of what it received
        // (closing the channel instead would have ended the upload as a complete, shorter file).
        let upload = async move { client.upload(chunks).await.map_err(HttpError::from) };
        let ((), answer) = futures::future::try_join(send, upload).await?;
        return Ok(answer.into_inner());
    }
    Err(bad_request(form::NO_FILE))
}

/// How long a new ingestion job's answer waits for the job history (fed by events) to show
/// the job, so that the client's first poll of GET /jobs/{id} reads the history's row.
const HISTORY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The ingestion's options; one not given takes the collection's settings
/// (`PUT /collections/{id}/settings`), else its default.
#[derive(Debug, Deserialize, IntoParams)]
pub struct IngestQuery {
    pub collection_id: Option<String>,
    /// Have the default chat model write a summary (default false).
    pub gen_doc_summaries: Option<bool>,
    /// Have the default chat model write questions (default false).
    pub gen_doc_questions: Option<bool>,
    /// Text recognition of scanned pages and images: `auto` (the default: a PDF's scanned
    /// pages, and images), `tesseract` (every page of a PDF, text layer or not) or `off`.
    pub ocr_model: Option<String>,
    /// Tesseract's languages, e.g. `eng` or `eng+deu` (installed ones only; default: the
    /// server's `DOCCHAT_OCR_LANGUAGE`).
    pub tesseract_lang: Option<String>,
}

/// An ingest query whose collection_id is there; absent options (empty strings) are left
/// to the collection's settings.
struct CheckedIngest {
    collection_id: String,
    gen_doc_summaries: Option<bool>,
    gen_doc_questions: Option<bool>,
    ocr_model: String,
    ocr_language: String,
}

impl IngestQuery {
    fn checked(self) -> HttpResult<CheckedIngest> {
        let collection_id = self.collection_id.unwrap_or_default();
        if collection_id.is_empty() {
            return Err(bad_request("collection_id is required"));
        }
        Ok(CheckedIngest {
            collection_id,
            gen_doc_summaries: self.gen_doc_summaries,
            gen_doc_questions: self.gen_doc_questions,
            ocr_model: self.ocr_model.unwrap_or_default(),
            ocr_language: self.tesseract_lang.unwrap_or_default(),
        })
    }
}

impl CheckedIngest {
    fn request(&self, upload_id: String) -> pb::IngestUploadRequest {
        pb::IngestUploadRequest {
            upload_id,
            collection_id: self.collection_id.clone(),
            gen_doc_summaries: self.gen_doc_summaries,
            gen_doc_questions: self.gen_doc_questions,
            ocr_model: self.ocr_model.clone(),
            ocr_language: self.ocr_language.clone(),
        }
    }

    fn request_all(&self, upload_ids: Vec<String>) -> pb::IngestUploadsRequest {
        pb::IngestUploadsRequest {
            upload_ids,
            collection_id: self.collection_id.clone(),
            gen_doc_summaries: self.gen_doc_summaries,
            gen_doc_questions: self.gen_doc_questions,
            ocr_model: self.ocr_model.clone(),
            ocr_language: self.ocr_language.clone(),
        }
    }
}

/// Queues the ingestion of one upload, or of several comma-separated ones (the client sends
/// `a%2Cb`), into the collection, and answers 204 without a job to wait on (see
/// [`ingest_upload_job`]). A list is all or nothing: ingest-service checks that every id is
/// the caller's upload (else 404 naming the first that is not), and that the whole list
/// fits the per-user document limit (else 403) and the collection's size limit (else 413),
/// before it queues every job in one transaction; a refused list queues nothing and leaves
/// the uploads as they were. An id named twice is ingested once.
#[utoipa::path(
    tag = "Document Ingestion",
    params(("upload_ids" = String, Path, description = "one upload id, or several comma-separated"), IngestQuery),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/uploads/{upload_ids}/ingest")]
pub async fn ingest_upload(
    api: Api,
    path: web::Path<String>,
    query: web::Query<IngestQuery>,
) -> HttpResult<HttpResponse> {
    let query = query.into_inner().checked()?;
    let ids = comma_list(&path);
    if ids.is_empty() {
        return Err(bad_request("no upload id given"));
    }
    api.ingest().ingest_uploads(query.request_all(ids)).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The official client's `ingest_uploads`: starts the ingestion of ONE upload into the
/// collection and answers 201 with the job (JobDetails, kind `IngestUploadsJob`), which the
/// client then polls on GET /jobs/{id}. Ingest-service runs one upload per job, and the
/// client waits for the one job it is given, so several comma-separated ids are a 400 (and
/// nothing starts) rather than jobs the client would not wait for; POST
/// /uploads/{ids}/ingest queues several without a job to wait on. The other query
/// parameters and the body (`metadata`) of the client's call are accepted and ignored, as
/// on /uploads/{ids}/ingest. The answer waits (up to [`HISTORY_WAIT`]) for the job history
/// to show the job; GET /jobs/{id} also answers a queued or running ingestion without a row.
#[utoipa::path(
    tag = "Document Ingestion",
    params(("upload_ids" = String, Path, description = "one upload id"), IngestQuery),
    responses((status = 201, body = JobDetails), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/uploads/{upload_ids}/ingest/job")]
pub async fn ingest_upload_job(
    api: Api,
    path: web::Path<String>,
    query: web::Query<IngestQuery>,
) -> HttpResult<HttpResponse> {
    let query = query.into_inner().checked()?;
    let upload_id = match comma_list(&path).as_slice() {
        [] => return Err(bad_request("no upload id given")),
        [one] => one.clone(),
        _ => {
            return Err(bad_request(
                "an ingestion job ingests one upload: start one job per upload id",
            ));
        }
    };
    let job = api
        .ingest()
        .ingest_upload(query.request(upload_id))
        .await?
        .into_inner();
    await_history_row(&api, &job.id).await;
    Ok(HttpResponse::Created().json(ingest_details(job)?))
}

/// Waits until the job history has `job_id`'s row, at most [`HISTORY_WAIT`].
async fn await_history_row(api: &Api, job_id: &str) {
    let deadline = tokio::time::Instant::now() + HISTORY_WAIT;
    while tokio::time::Instant::now() < deadline {
        let request = docchat_proto::admin::v1::GetOwnJobRequest {
            job_id: job_id.to_owned(),
        };
        if api.admin().get_own_job(request).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
