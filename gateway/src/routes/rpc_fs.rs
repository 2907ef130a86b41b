//! `/rpc/fs`: the official client's uploads (`upload`, `list_upload`, `delete_upload` in
//! h2ogpte 1.7.5). The same uploads as `PUT /api/v1/uploads` — one store, one body limit,
//! the same checks (`uploads::receive`) — under the path and answer shapes the client
//! reads: `{"id": ...}` for an upload and a deletion, a JSON array of ids for the listing.

use actix_web::{HttpRequest, HttpResponse, delete, get, put, web};
use docchat_proto::common::v1::Empty;
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::uploads::receive;
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult, bad_request};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(rpc_upload)
        .service(rpc_list_uploads)
        .service(rpc_delete_upload);
}

/// The client's `Identifier`: the upload's id (and its file name, which it ignores).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RpcUploaded {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// Uploads a file for a later ingestion: multipart with a part named `file`; the client's
/// other parts (`mtime`, `uri`) are accepted and not kept.
#[utoipa::path(
    tag = "Document Ingestion",
    request_body(content_type = "multipart/form-data", description = "a part named `file` (the client also sends `mtime` and `uri`, not kept)"),
    responses((status = 200, body = RpcUploaded), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/rpc/fs")]
pub async fn rpc_upload(
    api: Api,
    req: HttpRequest,
    body: web::Payload,
) -> HttpResult<HttpResponse> {
    let uploaded = receive(&api, &req, body).await?;
    Ok(HttpResponse::Ok().json(RpcUploaded {
        id: uploaded.id,
        filename: Some(uploaded.filename),
    }))
}

/// The caller's uploads not yet ingested (no document or job names them), newest first, at
/// most 10,000, as a JSON array of ids.
#[utoipa::path(
    tag = "Document Ingestion",
    responses((status = 200, body = Vec<String>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/rpc/fs")]
pub async fn rpc_list_uploads(api: Api) -> HttpResult<web::Json<Vec<String>>> {
    let list = api.ingest().list_uploads(Empty {}).await?.into_inner();
    Ok(web::Json(list.uploads.into_iter().map(|u| u.id).collect()))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct UploadIdQuery {
    /// The upload's id.
    pub id: Option<String>,
}

/// Deletes one of the caller's uploads; its file goes too unless a document was made from
/// it. 404 for an unknown id or another user's; 409 while a job ingests it.
#[utoipa::path(
    tag = "Document Ingestion",
    params(UploadIdQuery),
    responses((status = 200, body = RpcUploaded), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/rpc/fs")]
pub async fn rpc_delete_upload(
    api: Api,
    query: web::Query<UploadIdQuery>,
) -> HttpResult<web::Json<RpcUploaded>> {
    let id = query
        .into_inner()
        .id
        .filter(|id| !id.trim().is_empty())
        .ok_or_else(|| bad_request("id is required: DELETE /rpc/fs?id=<upload id>"))?;
    api.ingest()
        .delete_upload(pb::UploadRef { id: id.clone() })
        .await?;
    Ok(web::Json(RpcUploaded { id, filename: None }))
}
