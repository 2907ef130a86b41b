//! /api/v1/collections

use actix_web::{HttpResponse, delete, get, patch, post, web};
use chrono::{DateTime, Utc};
use docchat_proto::common::v1::PageRequest;
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{page, ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult};

/// A collection of documents.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Collection {
    pub id: String,
    pub name: String,
    pub description: String,
    pub embedding_model: String,
    pub document_count: i64,
    pub document_size: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub user_count: i64,
    pub is_public: bool,
    /// Owner.
    pub username: String,
    pub sessions_count: i64,
    pub status: String,
    /// Read-only.
    pub description_auto_generated: bool,
    /// Read-only; absent if never generated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_generated_at: Option<DateTime<Utc>>,
    /// Read-only; absent when the description is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_dirty_at: Option<DateTime<Utc>>,
    /// Read-only; absent when no regeneration runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_generation_started_at: Option<DateTime<Utc>>,
}

impl TryFrom<pb::Collection> for Collection {
    type Error = HttpError;

    fn try_from(c: pb::Collection) -> Result<Self, HttpError> {
        let pb::Collection {
            id,
            name,
            description,
            embedding_model,
            document_count,
            document_size,
            created_at,
            updated_at,
            user_count,
            is_public,
            username,
            sessions_count,
            status,
            description_auto_generated,
            description_generated_at,
            description_dirty_at,
            description_generation_started_at,
        } = c;
        Ok(Collection {
            id,
            name,
            description,
            embedding_model,
            document_count,
            document_size,
            created_at: ts_req(created_at)?,
            updated_at: ts_req(updated_at)?,
            user_count,
            is_public,
            username,
            sessions_count,
            status,
            description_auto_generated,
            description_generated_at: ts(description_generated_at),
            description_dirty_at: ts(description_dirty_at),
            description_generation_started_at: ts(description_generation_started_at),
        })
    }
}

/// Create-collection body; unknown fields (and the read-only description_* fields) are
/// ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateCollection {
    /// 1 to 255 characters (surrounding spaces trimmed).
    #[schema(min_length = 1, max_length = 255)]
    pub name: String,
    #[serde(default)]
    #[schema(max_length = 100000)]
    pub description: String,
    #[serde(default)]
    pub embedding_model: Option<String>,
}

/// Fields to change; a description set here stops its automatic generation.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateCollection {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(max_length = 100000)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// updated_at (default), created_at, name, document_count or document_size.
    pub sort_column: Option<String>,
    /// Default false (newest first).
    pub ascending: Option<bool>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_collection)
        .service(list_collections)
        .service(get_collection)
        .service(delete_collection)
        .service(update_collection);
}

#[utoipa::path(
    tag = "Collections",
    request_body = CreateCollection,
    responses(
        (status = 201, body = Collection),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "collection_limit or collection_limit_per_user reached", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/collections")]
pub async fn create_collection(
    api: Api,
    body: web::Json<CreateCollection>,
) -> HttpResult<HttpResponse> {
    let CreateCollection {
        name,
        description,
        embedding_model,
    } = body.into_inner();
    let request = pb::CreateCollectionRequest {
        name,
        description,
        embedding_model: embedding_model.unwrap_or_default(),
    };
    let created = api.ingest().create_collection(request).await?.into_inner();
    Ok(HttpResponse::Created().json(Collection::try_from(created)?))
}

#[utoipa::path(
    tag = "Collections",
    params(ListQuery),
    responses((status = 200, body = Vec<Collection>, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections")]
pub async fn list_collections(api: Api, query: web::Query<ListQuery>) -> HttpResult<HttpResponse> {
    let ListQuery {
        offset,
        limit,
        sort_column,
        ascending,
    } = query.into_inner();
    let (offset, limit) = page(offset, limit)?;
    let request = PageRequest {
        offset,
        limit,
        sort_column: sort_column.unwrap_or_default(),
        ascending: ascending.unwrap_or(false),
    };
    let list = api.ingest().list_collections(request).await?.into_inner();
    let items: Vec<Collection> = list
        .collections
        .into_iter()
        .map(Collection::try_from)
        .collect::<HttpResult<_>>()?;
    Ok(super::list_answer(
        &items,
        offset,
        items.len(),
        list.size_limited,
    ))
}

#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 200, body = Collection), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}")]
pub async fn get_collection(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Collection>> {
    let id = path.into_inner();
    let found = api
        .ingest()
        .get_collection(pb::CollectionRef { id })
        .await?;
    Ok(web::Json(found.into_inner().try_into()?))
}

#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/collections/{collection_id}")]
pub async fn delete_collection(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let id = path.into_inner();
    api.ingest()
        .delete_collection(pb::CollectionRef { id })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    request_body = UpdateCollection,
    responses((status = 200, body = Collection), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[patch("/collections/{collection_id}")]
pub async fn update_collection(
    api: Api,
    path: web::Path<String>,
    body: web::Json<UpdateCollection>,
) -> HttpResult<web::Json<Collection>> {
    let UpdateCollection { name, description } = body.into_inner();
    let request = pb::UpdateCollectionRequest {
        id: path.into_inner(),
        name,
        description,
    };
    let updated = api.ingest().update_collection(request).await?;
    Ok(web::Json(updated.into_inner().try_into()?))
}
