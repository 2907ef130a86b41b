//! /api/v1/collections

use std::collections::HashMap;

use actix_web::{HttpResponse, delete, get, patch, post, put, web};
use chrono::{DateTime, Utc};
use docchat_common::error::ApiError;
use docchat_proto::common::v1::{Empty, PageRequest};
use docchat_proto::ingest::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{Count, comma_list, page, ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult, bad_request};

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
    /// Stored as `PUT /collections/{id}/settings` stores them.
    #[serde(default)]
    #[schema(value_type = Option<CollectionSettings>)]
    pub collection_settings: Option<serde_json::Value>,
    /// Stored as `PUT /collections/{id}/chat_settings` stores them.
    #[serde(default)]
    #[schema(value_type = Option<ChatSettings>)]
    pub chat_settings: Option<serde_json::Value>,
}

/// The h2oGPTe client's CollectionSettings, every field optional; stored whole (unknown
/// fields dropped, at most 64 KiB as sent). `gen_doc_summaries`, `gen_doc_questions`,
/// `ocr_model` (`auto`, `tesseract` or `off`) and `tesseract_lang` (installed languages) are
/// the defaults of an ingestion into the collection that does not give them; the other
/// fields are kept for the client only.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // the schema of a JSON object ingest-service checks and stores
pub struct CollectionSettings {
    pub max_tokens_per_chunk: Option<i64>,
    pub chunk_overlap_tokens: Option<i64>,
    pub gen_doc_summaries: Option<bool>,
    pub gen_doc_questions: Option<bool>,
    pub audio_input_language: Option<String>,
    /// `auto`, `tesseract` or `off`.
    pub ocr_model: Option<String>,
    /// Installed Tesseract languages, `eng` or `eng+deu`.
    pub tesseract_lang: Option<String>,
    pub keep_tables_as_one_chunk: Option<bool>,
    pub chunk_by_page: Option<bool>,
    pub handwriting_check: Option<bool>,
    pub ingest_mode: Option<IngestMode>,
    pub follow_links: Option<bool>,
    pub max_depth: Option<i64>,
    pub max_documents: Option<i64>,
    pub root_dir: Option<String>,
    pub copy_document: Option<bool>,
    pub guardrails_settings: Option<GuardrailsSettings>,
    pub expiry_timezone: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
#[serde(rename_all = "snake_case")]
pub enum IngestMode {
    Standard,
    Lite,
    AgentOnly,
}

/// The h2oGPTe client's GuardrailsSettings (kept, not applied).
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
pub struct GuardrailsSettings {
    pub exception_message: Option<String>,
    pub show_violated_responses: Option<bool>,
    pub guardrails_on_transcriptions: Option<bool>,
    pub vision_guardrails_enabled: Option<bool>,
    pub guardrails_vision_llm: Option<String>,
    /// `[column_pattern, redaction_label]` pairs.
    #[schema(value_type = Option<Vec<Vec<String>>>)]
    pub column_redaction_config: Option<Vec<[String; 2]>>,
    pub disallowed_regex_patterns: Option<Vec<String>>,
    pub presidio_labels_to_flag: Option<Vec<String>>,
    pub pii_labels_to_flag: Option<Vec<String>>,
    pub pii_detection_parse_action: Option<PiiAction>,
    pub pii_detection_llm_input_action: Option<PiiAction>,
    pub pii_detection_llm_output_action: Option<PiiAction>,
    pub prompt_guard_labels_to_flag: Option<Vec<String>>,
    pub guardrails_labels_to_flag: Option<Vec<String>>,
    pub guardrails_llm: Option<String>,
    pub guardrails_safe_category: Option<String>,
    pub guardrails_entities: Option<HashMap<String, String>>,
    pub column_redaction_custom_entities_to_flag: Option<Vec<String>>,
    pub column_redaction_custom_entities: Option<HashMap<String, String>>,
    pub custom_pii_entities_to_flag: Option<Vec<String>>,
    pub custom_pii_entities: Option<HashMap<String, String>>,
}

#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
#[serde(rename_all = "lowercase")]
pub enum PiiAction {
    Allow,
    Redact,
    Fail,
}

/// The h2oGPTe client's ChatSettings, every field optional; stored whole for the client
/// (unknown fields dropped, at most 64 KiB as sent): chat does not read them.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // the schema of a JSON object ingest-service checks and stores
pub struct ChatSettings {
    pub llm: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub llm_args: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    pub self_reflection_config: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    pub rag_config: Option<serde_json::Value>,
    pub include_chat_history: Option<ChatHistory>,
    pub tags: Option<ChatSettingsTags>,
}

#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
#[serde(rename_all = "lowercase")]
pub enum ChatHistory {
    On,
    Off,
    Auto,
}

/// Tags as a list (any of them), or as `{include, exclude}`.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
#[serde(untagged)]
pub enum ChatSettingsTags {
    List(Vec<String>),
    Filter(TagFilter),
}

#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // documentation only
pub struct TagFilter {
    pub include: Option<Vec<String>>,
    pub exclude: Option<Vec<String>>,
}

/// A chunk of a collection's document (the client's Chunk).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Chunk {
    pub text: String,
    /// docchat's chunk id (the `chunk_id` of a reply's references).
    pub id: i64,
    /// Its document's name.
    pub name: String,
    /// Characters of `text`.
    pub size: i64,
    /// Page numbers, comma-separated.
    pub pages: String,
    /// Seconds into a transcript; absent for other documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
}

/// A chunk found by a search, or listed with its document (the client's ChunkSearchResult).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChunkSearchResult {
    pub text: String,
    /// docchat's chunk id.
    pub id: i64,
    /// Its document's name.
    pub name: String,
    /// Characters of `text`.
    pub size: i64,
    /// Page numbers, comma-separated (a search names the best-matching first).
    pub pages: String,
    /// Its document's id.
    pub topic: String,
    /// Relevance, higher is better (0 in a document's list of chunks).
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
}

fn pages_text(pages: &[u32]) -> String {
    pages
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn text_size(text: &str) -> i64 {
    super::json_int(text.chars().count() as u64)
}

impl From<pb::SearchHit> for Chunk {
    fn from(h: pb::SearchHit) -> Self {
        let pb::SearchHit {
            chunk_id,
            document_id: _,
            document_name,
            collection_id: _,
            text,
            pages,
            score: _,
            chunk_index: _,
            start_time,
            end_time,
        } = h;
        Chunk {
            size: text_size(&text),
            text,
            id: chunk_id,
            name: document_name,
            pages: pages_text(&pages),
            start_time,
            end_time,
        }
    }
}

impl From<pb::SearchHit> for ChunkSearchResult {
    fn from(h: pb::SearchHit) -> Self {
        let pb::SearchHit {
            chunk_id,
            document_id,
            document_name,
            collection_id: _,
            text,
            pages,
            score,
            chunk_index: _,
            start_time,
            end_time,
        } = h;
        ChunkSearchResult {
            size: text_size(&text),
            text,
            id: chunk_id,
            name: document_name,
            pages: pages_text(&pages),
            topic: document_id,
            score,
            start_time,
            end_time,
        }
    }
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

/// Registers this module's routes: `/collections/count` and `/collections/all` before
/// `/collections/{collection_id}`, which would take them as ids.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_collection)
        .service(list_collections)
        .service(get_collection_count)
        .service(list_all_collections)
        .service(get_collection)
        .service(delete_collection)
        .service(update_collection)
        .service(get_collection_settings)
        .service(update_collection_settings)
        .service(get_collection_chat_settings)
        .service(update_collection_chat_settings)
        .service(get_collection_metadata)
        .service(update_collection_metadata)
        .service(get_collection_chunks)
        .service(search_collection_chunks);
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
        collection_settings,
        chat_settings,
    } = body.into_inner();
    let json = |v: Option<serde_json::Value>| v.filter(|v| !v.is_null()).map(|v| v.to_string());
    let request = pb::CreateCollectionRequest {
        name,
        description,
        embedding_model: embedding_model.unwrap_or_default(),
        collection_settings_json: json(collection_settings),
        chat_settings_json: json(chat_settings),
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

/// How many collections the caller owns (public ones of others do not count).
#[utoipa::path(
    tag = "Collections",
    responses((status = 200, body = Count), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/count")]
pub async fn get_collection_count(api: Api) -> HttpResult<web::Json<Count>> {
    let count = api.ingest().count_collections(Empty {}).await?.into_inner();
    Ok(web::Json(Count { count: count.count }))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListAllQuery {
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
    /// Only collections whose name, id or owner's username contains this (any case; at
    /// most 255 characters).
    #[param(max_length = 255)]
    pub filter: Option<String>,
}

/// Every user's collections, for administrators (the admin center permission; 403
/// without it).
#[utoipa::path(
    tag = "Collections",
    params(ListAllQuery),
    responses((status = 200, body = Vec<Collection>, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/all")]
pub async fn list_all_collections(
    api: Api,
    query: web::Query<ListAllQuery>,
) -> HttpResult<HttpResponse> {
    let ListAllQuery {
        offset,
        limit,
        sort_column,
        ascending,
        filter,
    } = query.into_inner();
    let (offset, limit) = page(offset, limit)?;
    let request = pb::ListAllCollectionsRequest {
        offset,
        limit,
        sort_column: sort_column.unwrap_or_default(),
        ascending: ascending.unwrap_or(false),
        filter: filter.unwrap_or_default(),
    };
    let list = api
        .ingest()
        .list_all_collections(request)
        .await?
        .into_inner();
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

/// A stored JSON object as the answer's body.
fn json_object(text: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(text)
}

async fn stored(api: &Api, id: String) -> HttpResult<pb::CollectionSettings> {
    Ok(api
        .ingest()
        .get_collection_settings(pb::CollectionRef { id })
        .await?
        .into_inner())
}

/// Replaces one of an owned collection's stored objects.
async fn store(
    api: &Api,
    request: pb::UpdateCollectionSettingsRequest,
) -> HttpResult<HttpResponse> {
    api.ingest().update_collection_settings(request).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The collection's settings (`{}` when never set); anyone who can read the collection.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 200, body = CollectionSettings), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/settings")]
pub async fn get_collection_settings(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<HttpResponse> {
    let stored = stored(&api, path.into_inner()).await?;
    Ok(json_object(stored.collection_settings_json))
}

/// Replaces the collection's settings whole (owner only: 404 for others). A field of the
/// wrong type, an unknown enum value, an `ocr_model` other than `auto`, `tesseract` or `off`
/// or a `tesseract_lang` not installed is a 400; more than 64 KiB a 413.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    request_body = CollectionSettings,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/collections/{collection_id}/settings")]
pub async fn update_collection_settings(
    api: Api,
    path: web::Path<String>,
    body: web::Json<serde_json::Value>,
) -> HttpResult<HttpResponse> {
    let request = pb::UpdateCollectionSettingsRequest {
        id: path.into_inner(),
        collection_settings_json: Some(body.into_inner().to_string()),
        ..Default::default()
    };
    store(&api, request).await
}

/// The collection's chat settings (`{}` when never set); anyone who can read the collection.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 200, body = ChatSettings), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/chat_settings")]
pub async fn get_collection_chat_settings(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<HttpResponse> {
    let stored = stored(&api, path.into_inner()).await?;
    Ok(json_object(stored.chat_settings_json))
}

/// Replaces the collection's chat settings whole (owner only: 404 for others); kept for the
/// client. A field of the wrong type or an unknown enum value is a 400; more than 64 KiB a
/// 413.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    request_body = ChatSettings,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/collections/{collection_id}/chat_settings")]
pub async fn update_collection_chat_settings(
    api: Api,
    path: web::Path<String>,
    body: web::Json<serde_json::Value>,
) -> HttpResult<HttpResponse> {
    let request = pb::UpdateCollectionSettingsRequest {
        id: path.into_inner(),
        chat_settings_json: Some(body.into_inner().to_string()),
        ..Default::default()
    };
    store(&api, request).await
}

/// The collection's metadata (`{}` when never set); anyone who can read the collection.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 200, body = Object), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/metadata")]
pub async fn get_collection_metadata(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<HttpResponse> {
    let stored = stored(&api, path.into_inner()).await?;
    Ok(json_object(stored.metadata_json))
}

/// Replaces the collection's metadata whole: any JSON object (else 400), at most 64 KiB
/// (else 413). Owner only: 404 for others.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    request_body = Object,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/collections/{collection_id}/metadata")]
pub async fn update_collection_metadata(
    api: Api,
    path: web::Path<String>,
    body: web::Json<serde_json::Value>,
) -> HttpResult<HttpResponse> {
    let request = pb::UpdateCollectionSettingsRequest {
        id: path.into_inner(),
        metadata_json: Some(body.into_inner().to_string()),
        ..Default::default()
    };
    store(&api, request).await
}

/// The most chunk ids one `GET /collections/{id}/chunks/{ids}` takes.
pub const MAX_CHUNK_IDS: usize = 200;

/// Distinct chunk ids of a comma-separated list, in order (400 for anything else, none, or
/// more than [`MAX_CHUNK_IDS`]).
fn chunk_ids(list: &str) -> HttpResult<Vec<i64>> {
    let mut ids: Vec<i64> = Vec::new();
    for item in comma_list(list) {
        let id: i64 = item
            .parse()
            .map_err(|_| bad_request(format!("chunk id {item:?} is not an integer")))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return Err(bad_request("no chunk id given"));
    }
    if ids.len() > MAX_CHUNK_IDS {
        return Err(bad_request(format!(
            "at most {MAX_CHUNK_IDS} chunk ids at once"
        )));
    }
    Ok(ids)
}

/// Chunks of a collection the caller can read by docchat's chunk id (the `chunk_id` of a
/// reply's references), comma-separated (`1,2`, also sent as `1%2C2`), in the order asked;
/// an id repeated is answered once. An id that is not a chunk of this collection is a 404
/// naming it.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path), ("chunk_ids" = String, Path, description = "chunk ids, comma-separated (at most 200)")),
    responses((status = 200, body = Vec<Chunk>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/chunks/{chunk_ids}")]
pub async fn get_collection_chunks(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<web::Json<Vec<Chunk>>> {
    let (collection_id, list) = path.into_inner();
    let ids = chunk_ids(&list)?;
    let request = pb::ListChunksRequest {
        collection_id: collection_id.clone(),
        around: ids.clone(),
        neighbours: 0,
        offset: 0,
        limit: u32::try_from(ids.len()).unwrap_or(u32::MAX),
    };
    let found = api.ingest().list_chunks(request).await?.into_inner();
    let mut by_id: HashMap<i64, pb::SearchHit> =
        found.chunks.into_iter().map(|c| (c.chunk_id, c)).collect();
    ids.iter()
        .map(|id| {
            by_id.remove(id).map(Chunk::from).ok_or_else(|| {
                HttpError(ApiError::not_found(format!(
                    "chunk {id} not found in collection {collection_id}"
                )))
            })
        })
        .collect::<HttpResult<Vec<_>>>()
        .map(web::Json)
}

/// The most hits `search_chunks` reaches: `offset + limit` at most this.
pub const MAX_SEARCH_HITS: i64 = 100;
/// The most document ids `topics` takes.
pub const MAX_TOPICS: usize = 1000;
/// `limit` when none is given.
pub const DEFAULT_SEARCH_LIMIT: i64 = 8;

#[derive(Debug, Deserialize, ToSchema)]
pub struct SearchChunks {
    /// What to look for (1 to 10000 characters).
    #[schema(min_length = 1, max_length = 10000)]
    pub query: String,
    /// Only chunks of these documents (ids); empty: every document of the collection.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Vec<String>,
    /// Hits to skip (default 0).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 99)]
    pub offset: Option<i64>,
    /// Hits to return (default 8); `offset + limit` is at most 100.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// Hybrid search (lexical and vector, fused by reciprocal rank; reranked when a reranker is
/// configured) in a collection the caller can read, best first, paged by `offset` and
/// `limit` within the 100 best hits.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    request_body = SearchChunks,
    responses((status = 200, body = Vec<ChunkSearchResult>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/collections/{collection_id}/chunks/search")]
pub async fn search_collection_chunks(
    api: Api,
    path: web::Path<String>,
    body: web::Json<SearchChunks>,
) -> HttpResult<web::Json<Vec<ChunkSearchResult>>> {
    let SearchChunks {
        query,
        topics,
        offset,
        limit,
    } = body.into_inner();
    let offset = offset.unwrap_or(0);
    let limit = limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
    if offset < 0 {
        return Err(bad_request("offset must not be negative"));
    }
    if limit < 1 {
        return Err(bad_request("limit must be at least 1"));
    }
    if offset.saturating_add(limit) > MAX_SEARCH_HITS {
        return Err(bad_request(format!(
            "the search reaches its {MAX_SEARCH_HITS} best chunks: offset + limit must be at most {MAX_SEARCH_HITS}"
        )));
    }
    if topics.len() > MAX_TOPICS {
        return Err(bad_request(format!(
            "topics names at most {MAX_TOPICS} documents"
        )));
    }
    let request = pb::SearchRequest {
        collection_ids: vec![path.into_inner()],
        document_ids: topics,
        query,
        top_k: u32::try_from(offset + limit).unwrap_or(0),
        no_rerank: false,
    };
    let found = api.ingest().search(request).await?.into_inner();
    Ok(web::Json(
        found
            .hits
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(0))
            .map(ChunkSearchResult::from)
            .collect(),
    ))
}
