//! /api/v1/extractors (names of the h2oGPTe client; PATCH rules of SPEC.md).

use actix_web::{HttpResponse, delete, get, patch, post, web};
use chrono::{DateTime, Utc};
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{list_answer, page, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult};

/// Create and PATCH bodies: every field optional (null or omitted keeps the value).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ExtractorBody {
    /// 1 to 255 characters; required on create.
    #[schema(min_length = 1, max_length = 255)]
    pub name: Option<String>,
    pub description: Option<String>,
    pub llm: Option<String>,
    /// A JSON Schema serialized as a string; empty resets to the default.
    pub schema: Option<String>,
    /// Empty resets to the default prompt.
    pub prompt: Option<String>,
    pub pre_prompt_summary: Option<String>,
    pub system_prompt: Option<String>,
    pub keep_intermediate_results: Option<bool>,
    /// At least 1.
    #[schema(minimum = 1)]
    pub max_num_chunks: Option<i64>,
    /// on, off or auto.
    pub vision: Option<String>,
    pub vision_llm: Option<String>,
    pub image_batch_image_prompt: Option<String>,
    pub image_batch_final_prompt: Option<String>,
    /// Replaces the stored settings whole.
    #[schema(value_type = Option<Object>)]
    pub guardrails_settings: Option<serde_json::Value>,
}

impl From<ExtractorBody> for pb::ExtractorFields {
    fn from(b: ExtractorBody) -> Self {
        let ExtractorBody {
            name,
            description,
            llm,
            schema,
            prompt,
            pre_prompt_summary,
            system_prompt,
            keep_intermediate_results,
            max_num_chunks,
            vision,
            vision_llm,
            image_batch_image_prompt,
            image_batch_final_prompt,
            guardrails_settings,
        } = b;
        pb::ExtractorFields {
            name,
            description,
            llm,
            schema,
            prompt,
            pre_prompt_summary,
            system_prompt,
            keep_intermediate_results,
            max_num_chunks,
            vision,
            vision_llm,
            image_batch_image_prompt,
            image_batch_final_prompt,
            guardrails_settings_json: guardrails_settings
                .filter(|g| !g.is_null())
                .map(|g| g.to_string()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Extractor {
    pub id: String,
    pub name: String,
    pub description: String,
    pub llm: String,
    pub schema: String,
    pub prompt: String,
    pub pre_prompt_summary: Option<String>,
    pub system_prompt: Option<String>,
    pub keep_intermediate_results: bool,
    pub max_num_chunks: Option<i64>,
    pub vision: String,
    pub vision_llm: Option<String>,
    pub image_batch_image_prompt: Option<String>,
    pub image_batch_final_prompt: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub guardrails_settings: Option<serde_json::Value>,
    pub is_public: bool,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<pb::Extractor> for Extractor {
    type Error = HttpError;

    fn try_from(e: pb::Extractor) -> Result<Self, HttpError> {
        let pb::Extractor {
            id,
            fields,
            is_public,
            created_at,
        } = e;
        let pb::ExtractorFields {
            name,
            description,
            llm,
            schema,
            prompt,
            pre_prompt_summary,
            system_prompt,
            keep_intermediate_results,
            max_num_chunks,
            vision,
            vision_llm,
            image_batch_image_prompt,
            image_batch_final_prompt,
            guardrails_settings_json,
        } = fields.unwrap_or_default();
        Ok(Extractor {
            id,
            name: name.unwrap_or_default(),
            description: description.unwrap_or_default(),
            llm: llm.unwrap_or_default(),
            schema: schema.unwrap_or_default(),
            prompt: prompt.unwrap_or_default(),
            pre_prompt_summary,
            system_prompt,
            keep_intermediate_results: keep_intermediate_results.unwrap_or(false),
            max_num_chunks,
            vision: vision.unwrap_or_else(|| "auto".into()),
            vision_llm,
            image_batch_image_prompt,
            image_batch_final_prompt,
            guardrails_settings: guardrails_settings_json
                .and_then(|g| serde_json::from_str(&g).ok()),
            is_public,
            created_at: ts_req(created_at)?,
        })
    }
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    pub name_filter: Option<String>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_extractor)
        .service(list_extractors)
        .service(get_extractor)
        .service(update_extractor)
        .service(delete_extractor);
}

#[utoipa::path(tag = "Extractors", request_body = ExtractorBody,
    responses((status = 200, body = Extractor), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/extractors")]
pub async fn create_extractor(
    api: Api,
    body: web::Json<ExtractorBody>,
) -> HttpResult<web::Json<Extractor>> {
    let fields = pb::ExtractorFields::from(body.into_inner());
    let created = api.ingest().create_extractor(fields).await?;
    Ok(web::Json(created.into_inner().try_into()?))
}

/// A page holds at most 8 MiB of stored definitions (at least one extractor), so it can hold
/// fewer than `limit`; then `x-next-offset` names the offset of the next page.
#[utoipa::path(tag = "Extractors", params(ListQuery),
    responses((status = 200, body = Vec<Extractor>, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/extractors")]
pub async fn list_extractors(api: Api, query: web::Query<ListQuery>) -> HttpResult<HttpResponse> {
    let ListQuery {
        offset,
        limit,
        name_filter,
    } = query.into_inner();
    let (offset, limit) = page(offset, limit)?;
    let request = pb::ListExtractorsRequest {
        offset,
        limit,
        name_filter: name_filter.unwrap_or_default(),
    };
    let list = api.ingest().list_extractors(request).await?.into_inner();
    let items: Vec<Extractor> = list
        .extractors
        .into_iter()
        .map(Extractor::try_from)
        .collect::<HttpResult<_>>()?;
    Ok(list_answer(&items, offset, items.len(), list.size_limited))
}

#[utoipa::path(tag = "Extractors", params(("extractor_id" = String, Path)),
    responses((status = 200, body = Extractor), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/extractors/{extractor_id}")]
pub async fn get_extractor(api: Api, path: web::Path<String>) -> HttpResult<web::Json<Extractor>> {
    let id = path.into_inner();
    let found = api.ingest().get_extractor(pb::ExtractorRef { id }).await?;
    Ok(web::Json(found.into_inner().try_into()?))
}

#[utoipa::path(tag = "Extractors", params(("extractor_id" = String, Path)), request_body = ExtractorBody,
    responses((status = 200, body = Extractor), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[patch("/extractors/{extractor_id}")]
pub async fn update_extractor(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ExtractorBody>,
) -> HttpResult<web::Json<Extractor>> {
    let request = pb::UpdateExtractorRequest {
        id: path.into_inner(),
        fields: Some(body.into_inner().into()),
    };
    let updated = api.ingest().update_extractor(request).await?;
    Ok(web::Json(updated.into_inner().try_into()?))
}

#[utoipa::path(tag = "Extractors", params(("extractor_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/extractors/{extractor_id}")]
pub async fn delete_extractor(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let id = path.into_inner();
    api.ingest()
        .delete_extractor(pb::ExtractorRef { id })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
