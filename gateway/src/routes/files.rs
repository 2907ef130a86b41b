//! `GET /file?id=&name=`: agent file download (SPEC.md, outside /api/v1). Agent files come
//! with the agent half; until then no id names one, so a valid request is a 404.

use actix_web::{HttpResponse, get, web};
use docchat_common::error::ApiError;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(download_file);
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct FileQuery {
    /// The document id from an agent file's metadata.
    pub id: String,
    /// The file name (URL-encoded).
    pub name: Option<String>,
}

#[utoipa::path(tag = "Agent Files", params(FileQuery),
    responses(
        (status = 200, description = "the file's bytes", content_type = "application/octet-stream"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "no agent file with this id that the caller can read", body = ErrorBody),
    ),
    security(("bearer" = [])))]
#[get("/file")]
pub async fn download_file(_api: Api, query: web::Query<FileQuery>) -> HttpResult<HttpResponse> {
    Err(ApiError::not_found(format!("agent file {} not found", query.id)).into())
}
