//! Tags and their documents (names of the h2oGPTe client).

use actix_web::{HttpResponse, delete, get, patch, post, web};
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::comma_list;
use super::documents::{Document, seen_by};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Tag {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub format: Option<String>,
}

impl From<pb::Tag> for Tag {
    fn from(t: pb::Tag) -> Self {
        let pb::Tag {
            id,
            name,
            description,
            format,
        } = t;
        Tag {
            id,
            name,
            description,
            format,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateTag {
    /// 1 to 255 characters, no commas.
    #[schema(min_length = 1, max_length = 255)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateTag {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TagId {
    pub tag_id: String,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListQuery {
    /// Only tags applied to at least one document.
    pub linked_only: Option<bool>,
    /// Tags on documents the caller can access plus the caller's own tags.
    pub user_scope: Option<bool>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct DocumentsQuery {
    pub collection_id: Option<String>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_tag)
        .service(list_tags)
        .service(list_documents_for_tags)
        .service(get_tag)
        .service(update_tag)
        .service(delete_tag)
        .service(create_tag_on_document)
        .service(delete_tag_from_document);
}

#[utoipa::path(tag = "Tags", request_body = CreateTag,
    responses((status = 201, body = Tag), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/tags")]
pub async fn create_tag(api: Api, body: web::Json<CreateTag>) -> HttpResult<HttpResponse> {
    let CreateTag {
        name,
        description,
        format,
    } = body.into_inner();
    let request = pb::TagRequest {
        name,
        description,
        format,
    };
    let tag = api.ingest().create_tag(request).await?.into_inner();
    Ok(HttpResponse::Created().json(Tag::from(tag)))
}

#[utoipa::path(tag = "Tags", params(ListQuery),
    responses((status = 200, body = Vec<Tag>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/tags")]
pub async fn list_tags(api: Api, query: web::Query<ListQuery>) -> HttpResult<web::Json<Vec<Tag>>> {
    let request = pb::ListTagsRequest {
        linked_only: query.linked_only.unwrap_or(false),
        user_scope: query.user_scope.unwrap_or(false),
    };
    let list = api.ingest().list_tags(request).await?.into_inner();
    Ok(web::Json(list.tags.into_iter().map(Tag::from).collect()))
}

#[utoipa::path(tag = "Tags", params(("tag_name" = String, Path)),
    responses((status = 200, body = Tag), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/tags/{tag_name}")]
pub async fn get_tag(api: Api, path: web::Path<String>) -> HttpResult<web::Json<Tag>> {
    let request = pb::TagRequest {
        name: path.into_inner(),
        ..Default::default()
    };
    Ok(web::Json(
        api.ingest().get_tag(request).await?.into_inner().into(),
    ))
}

#[utoipa::path(tag = "Tags", params(("tag_name" = String, Path)), request_body = UpdateTag,
    responses((status = 200, body = Tag), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[patch("/tags/{tag_name}")]
pub async fn update_tag(
    api: Api,
    path: web::Path<String>,
    body: web::Json<UpdateTag>,
) -> HttpResult<web::Json<Tag>> {
    let UpdateTag {
        description,
        format,
    } = body.into_inner();
    let request = pb::TagRequest {
        name: path.into_inner(),
        description,
        format,
    };
    Ok(web::Json(
        api.ingest().update_tag(request).await?.into_inner().into(),
    ))
}

#[utoipa::path(tag = "Tags", params(("tag_name" = String, Path)),
    responses((status = 200, body = TagId), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/tags/{tag_name}")]
pub async fn delete_tag(api: Api, path: web::Path<String>) -> HttpResult<web::Json<TagId>> {
    let request = pb::TagRequest {
        name: path.into_inner(),
        ..Default::default()
    };
    let tag = api.ingest().delete_tag(request).await?.into_inner();
    Ok(web::Json(TagId { tag_id: tag.id }))
}

#[utoipa::path(tag = "Tags", params(("document_id" = String, Path)), request_body = CreateTag,
    responses((status = 201, body = Tag), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/documents/{document_id}/tags")]
pub async fn create_tag_on_document(
    api: Api,
    path: web::Path<String>,
    body: web::Json<CreateTag>,
) -> HttpResult<HttpResponse> {
    let CreateTag {
        name,
        description,
        format,
    } = body.into_inner();
    let request = pb::DocumentTagRequest {
        document_id: path.into_inner(),
        tag_name: name,
        description,
        format,
    };
    let tag = api.ingest().tag_document(request).await?.into_inner();
    Ok(HttpResponse::Created().json(Tag::from(tag)))
}

#[utoipa::path(tag = "Tags", params(("document_id" = String, Path), ("tag_name" = String, Path)),
    responses((status = 200, body = TagId), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/documents/{document_id}/tags/{tag_name}")]
pub async fn delete_tag_from_document(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<web::Json<TagId>> {
    let (document_id, tag_name) = path.into_inner();
    let request = pb::DocumentTagRequest {
        document_id,
        tag_name,
        ..Default::default()
    };
    let tag = api.ingest().untag_document(request).await?.into_inner();
    Ok(web::Json(TagId { tag_id: tag.id }))
}

#[utoipa::path(tag = "Tags", params(("tag_names" = String, Path, description = "comma-separated tag names"), DocumentsQuery),
    responses((status = 200, body = Vec<Document>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/tags/{tag_names}/documents")]
pub async fn list_documents_for_tags(
    api: Api,
    path: web::Path<String>,
    query: web::Query<DocumentsQuery>,
) -> HttpResult<web::Json<Vec<Document>>> {
    let request = pb::DocumentsForTagsRequest {
        tag_names: comma_list(&path),
        collection_id: query.into_inner().collection_id.filter(|c| !c.is_empty()),
    };
    let list = api
        .ingest()
        .list_documents_for_tags(request)
        .await?
        .into_inner();
    Ok(web::Json(seen_by(&api, list.documents).await?))
}
