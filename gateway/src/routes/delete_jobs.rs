//! The h2oGPTe client's bulk deletes as jobs: `POST /collections/delete_job`,
//! `/documents/delete_job`, `/collections/{id}/documents/delete_job` and `/chats/delete_job`.
//!
//! The client waits on the job at once (`GET /jobs/{id}` right after the 201), so the gateway
//! deletes before it answers, through the same calls as the single deletes (the caller's
//! rights: another user's item is "not found"), and admin-service records the job finished
//! in the caller's history: `completed` when every item went, else `failed` with one error
//! line per item left (the others are deleted all the same). Registered before the
//! collection, document and chat routes, so `delete_job` is never read as an id.

use actix_web::{HttpResponse, post, web};
use docchat_common::jobs::{
    KIND_DELETE_CHAT_SESSIONS, KIND_DELETE_COLLECTIONS, KIND_DELETE_DOCUMENTS,
    KIND_DELETE_DOCUMENTS_FROM_COLLECTION,
};
use docchat_common::time::to_proto;
use docchat_proto::admin::v1 as admin;
use docchat_proto::chat::v1 as chat;
use docchat_proto::ingest::v1 as ingest;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::jobs::{JobDetails, details};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult, bad_request};

/// The most items one job deletes.
pub const MAX_ITEMS: usize = 1000;

#[derive(Debug, Deserialize, ToSchema)]
pub struct DeleteCollectionsJob {
    pub collection_ids: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DeleteDocumentsJob {
    pub document_ids: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DeleteChatSessionsJob {
    pub session_ids: Vec<String>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(delete_collections_job)
        .service(delete_documents_job)
        .service(delete_documents_from_collection_job)
        .service(delete_chat_sessions_job);
}

/// What one job deletes.
enum Target<'a> {
    Collection,
    Document,
    /// A document of this collection (another collection's is an error of the job).
    DocumentOf(&'a str),
    ChatSession,
}

impl Target<'_> {
    fn noun(&self) -> &'static str {
        match self {
            Target::Collection => "collection",
            Target::Document | Target::DocumentOf(_) => "document",
            Target::ChatSession => "chat session",
        }
    }

    async fn delete(&self, api: &Api, id: &str) -> Result<(), HttpError> {
        let id = id.to_owned();
        match self {
            Target::Collection => {
                api.ingest()
                    .delete_collection(ingest::CollectionRef { id })
                    .await?;
            }
            Target::Document => {
                api.ingest()
                    .delete_document(ingest::DocumentRef { id })
                    .await?;
            }
            Target::DocumentOf(collection_id) => {
                let document = api
                    .ingest()
                    .get_document(ingest::DocumentRef { id: id.clone() })
                    .await?
                    .into_inner();
                if document.collection_id != *collection_id {
                    return Err(HttpError(docchat_common::ApiError::not_found(format!(
                        "not in collection {collection_id}"
                    ))));
                }
                api.ingest()
                    .delete_document(ingest::DocumentRef { id })
                    .await?;
            }
            Target::ChatSession => {
                api.chat().delete_session(chat::SessionRef { id }).await?;
            }
        }
        Ok(())
    }
}

/// Deletes `ids` (each once, in order), records the job and answers it (201).
async fn run(
    api: &Api,
    kind: &str,
    target: Target<'_>,
    ids: Vec<String>,
) -> HttpResult<HttpResponse> {
    let noun = target.noun();
    if ids.is_empty() {
        return Err(bad_request(format!("name at least one {noun}")));
    }
    if ids.len() > MAX_ITEMS {
        return Err(bad_request(format!(
            "at most {MAX_ITEMS} {noun}s a job, not {}",
            ids.len()
        )));
    }
    let started = to_proto(docchat_common::time::now());
    let mut seen = std::collections::HashSet::new();
    let mut errors = Vec::new();
    for id in ids.iter().filter(|id| seen.insert(id.as_str())) {
        if let Err(e) = target.delete(api, id).await {
            errors.push(format!("{noun} {id}: {}", e.0.message));
        }
    }
    let collection_id = match target {
        Target::DocumentOf(id) => id.to_owned(),
        _ => String::new(),
    };
    let request = admin::RecordOwnJobRequest {
        kind: kind.to_owned(),
        status: if errors.is_empty() {
            "completed"
        } else {
            "failed"
        }
        .to_owned(),
        errors,
        started_at: Some(started),
        collection_id,
    };
    let job = api.admin().record_own_job(request).await?.into_inner();
    Ok(HttpResponse::Created().json(details(job)?))
}

/// Deletes the caller's collections with their documents, as a job (done when answered).
#[utoipa::path(tag = "Jobs", request_body = DeleteCollectionsJob,
    responses((status = 201, body = JobDetails), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/collections/delete_job")]
pub async fn delete_collections_job(
    api: Api,
    body: web::Json<DeleteCollectionsJob>,
) -> HttpResult<HttpResponse> {
    let ids = body.into_inner().collection_ids;
    run(&api, KIND_DELETE_COLLECTIONS, Target::Collection, ids).await
}

/// Deletes the caller's documents, as a job (done when answered).
#[utoipa::path(tag = "Jobs", request_body = DeleteDocumentsJob,
    responses((status = 201, body = JobDetails), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/documents/delete_job")]
pub async fn delete_documents_job(
    api: Api,
    body: web::Json<DeleteDocumentsJob>,
) -> HttpResult<HttpResponse> {
    let ids = body.into_inner().document_ids;
    run(&api, KIND_DELETE_DOCUMENTS, Target::Document, ids).await
}

/// Deletes documents of one of the caller's collections, as a job (done when answered); a
/// document of another collection is an error of the job and stays.
#[utoipa::path(tag = "Jobs", params(("collection_id" = String, Path)), request_body = DeleteDocumentsJob,
    responses((status = 201, body = JobDetails), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/collections/{collection_id}/documents/delete_job")]
pub async fn delete_documents_from_collection_job(
    api: Api,
    path: web::Path<String>,
    body: web::Json<DeleteDocumentsJob>,
) -> HttpResult<HttpResponse> {
    let collection_id = path.into_inner();
    // The collection must be the caller's (404 otherwise), before anything is deleted.
    api.ingest()
        .get_collection(ingest::CollectionRef {
            id: collection_id.clone(),
        })
        .await?;
    let ids = body.into_inner().document_ids;
    let target = Target::DocumentOf(&collection_id);
    run(&api, KIND_DELETE_DOCUMENTS_FROM_COLLECTION, target, ids).await
}

/// Deletes the caller's chat sessions with their messages, as a job (done when answered).
#[utoipa::path(tag = "Jobs", request_body = DeleteChatSessionsJob,
    responses((status = 201, body = JobDetails), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/chats/delete_job")]
pub async fn delete_chat_sessions_job(
    api: Api,
    body: web::Json<DeleteChatSessionsJob>,
) -> HttpResult<HttpResponse> {
    let ids = body.into_inner().session_ids;
    run(&api, KIND_DELETE_CHAT_SESSIONS, Target::ChatSession, ids).await
}
