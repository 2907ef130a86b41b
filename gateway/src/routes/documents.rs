//! /api/v1/documents and a collection's documents.

use actix_web::{HttpResponse, delete, get, web};
use chrono::{DateTime, Utc};
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{page, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// A document of a collection.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Document {
    pub id: String,
    pub name: String,
    pub username: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub size: i64,
    pub page_count: i64,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub collection_id: String,
    /// The chat session that generated the document; absent for uploads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_session_id: Option<String>,
    /// Absent unless agent-generated and the session is visible to the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_session_name: Option<String>,
    pub chat_session_visible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl From<pb::Document> for Document {
    fn from(d: pb::Document) -> Self {
        let pb::Document {
            id,
            name,
            username,
            r#type,
            size,
            page_count,
            status,
            created_at,
            updated_at,
            collection_id,
            chat_session_id,
            chat_session_name,
            chat_session_visible,
            summary,
        } = d;
        Document {
            id,
            name,
            username,
            kind: r#type,
            size,
            page_count,
            status,
            created_at: ts_req(created_at),
            updated_at: ts_req(updated_at),
            collection_id,
            chat_session_id,
            chat_session_name,
            chat_session_visible,
            summary,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub count: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AudioSegment {
    pub start: f64,
    pub end: Option<f64>,
    pub speaker: String,
    pub original_speaker: Option<String>,
    pub text: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// updated_at (default), created_at, name, size, page_count, type, status.
    pub sort_column: Option<String>,
    pub ascending: Option<bool>,
    /// Only documents this chat session generated (a UUID).
    pub chat_session_id: Option<String>,
    /// Order by source chat first so pages hold whole groups.
    pub group_by_source_chat: Option<bool>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct CountQuery {
    pub chat_session_id: Option<String>,
}

/// Registers this module's routes (`/documents/count` before `/documents/{document_id}`).
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_documents_for_collection)
        .service(get_document_count_for_collection)
        .service(list_documents)
        .service(get_document_count)
        .service(get_document)
        .service(delete_document)
        .service(get_audio_timestamps);
}

impl ListQuery {
    fn request(self, collection_id: Option<String>) -> HttpResult<pb::ListDocumentsRequest> {
        let (offset, limit) = page(self.offset, self.limit)?;
        Ok(pb::ListDocumentsRequest {
            offset,
            limit,
            sort_column: self.sort_column.unwrap_or_default(),
            ascending: self.ascending.unwrap_or(false),
            chat_session_id: self.chat_session_id,
            group_by_source_chat: self.group_by_source_chat.unwrap_or(false),
            collection_id,
        })
    }
}

async fn list(
    api: &Api,
    request: pb::ListDocumentsRequest,
) -> HttpResult<web::Json<Vec<Document>>> {
    let list = api.ingest().list_documents(request).await?.into_inner();
    Ok(web::Json(
        list.documents.into_iter().map(Document::from).collect(),
    ))
}

async fn count(api: &Api, request: pb::ListDocumentsRequest) -> HttpResult<web::Json<Count>> {
    let count = api
        .ingest()
        .count_documents(request)
        .await?
        .into_inner()
        .count;
    Ok(web::Json(Count { count }))
}

#[utoipa::path(tag = "Documents", params(ListQuery),
    responses((status = 200, body = Vec<Document>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/documents")]
pub async fn list_documents(
    api: Api,
    query: web::Query<ListQuery>,
) -> HttpResult<web::Json<Vec<Document>>> {
    list(&api, query.into_inner().request(None)?).await
}

#[utoipa::path(tag = "Documents", params(CountQuery),
    responses((status = 200, body = Count), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/documents/count")]
pub async fn get_document_count(
    api: Api,
    query: web::Query<CountQuery>,
) -> HttpResult<web::Json<Count>> {
    let request = pb::ListDocumentsRequest {
        chat_session_id: query.into_inner().chat_session_id,
        ..Default::default()
    };
    count(&api, request).await
}

#[utoipa::path(tag = "Documents", params(("document_id" = String, Path)),
    responses((status = 200, body = Document), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/documents/{document_id}")]
pub async fn get_document(api: Api, path: web::Path<String>) -> HttpResult<web::Json<Document>> {
    let id = path.into_inner();
    let found = api.ingest().get_document(pb::DocumentRef { id }).await?;
    Ok(web::Json(found.into_inner().into()))
}

#[utoipa::path(tag = "Documents", params(("document_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/documents/{document_id}")]
pub async fn delete_document(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let id = path.into_inner();
    api.ingest().delete_document(pb::DocumentRef { id }).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Documents", params(("document_id" = String, Path)),
    responses((status = 200, body = Vec<AudioSegment>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/documents/{document_id}/audio_timestamps")]
pub async fn get_audio_timestamps(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<AudioSegment>>> {
    let id = path.into_inner();
    let list = api
        .ingest()
        .get_audio_timestamps(pb::DocumentRef { id })
        .await?;
    Ok(web::Json(
        list.into_inner()
            .segments
            .into_iter()
            .map(|s| AudioSegment {
                start: s.start,
                end: s.end,
                speaker: s.speaker,
                original_speaker: s.original_speaker,
                text: s.text,
                kind: s.r#type,
            })
            .collect(),
    ))
}

#[utoipa::path(tag = "Collections", params(("collection_id" = String, Path), ListQuery),
    responses((status = 200, body = Vec<Document>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/collections/{collection_id}/documents")]
pub async fn list_documents_for_collection(
    api: Api,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> HttpResult<web::Json<Vec<Document>>> {
    list(&api, query.into_inner().request(Some(path.into_inner()))?).await
}

#[utoipa::path(tag = "Collections", params(("collection_id" = String, Path)),
    responses((status = 200, body = Count), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/collections/{collection_id}/documents/count")]
pub async fn get_document_count_for_collection(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Count>> {
    let request = pb::ListDocumentsRequest {
        collection_id: Some(path.into_inner()),
        ..Default::default()
    };
    count(&api, request).await
}
