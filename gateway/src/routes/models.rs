//! /api/v1/models: the chat models callers name as `llm`, the client's capability lists
//! (vision, reasoning) over them, and /api/v1/embedding_models: what a collection may embed
//! with.

use std::collections::BTreeMap;

use actix_web::{get, post, web};
use docchat_common::error::ApiError;
use docchat_proto::chat::v1 as pb;
use docchat_proto::common::v1::Empty;
use docchat_proto::ingest::v1 as ingest;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// A model callers can name as `llm`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Model {
    pub id: String,
    /// Same as `id` (SPEC.md allows either).
    pub name: String,
    pub display_name: String,
    pub base_model: String,
    pub context_length: u64,
    /// Per million input tokens.
    pub input_price: f64,
    /// Per million output tokens.
    pub output_price: f64,
    pub vision: bool,
    /// A reasoning ("thinking") model.
    pub reasoning: bool,
    /// The target of `auto`.
    pub is_default: bool,
}

impl From<pb::Model> for Model {
    fn from(m: pb::Model) -> Self {
        let pb::Model {
            id,
            display_name,
            base_model,
            context_length,
            input_price,
            output_price,
            vision,
            is_default,
            provider: _,
            reasoning,
        } = m;
        Model {
            name: id.clone(),
            id,
            display_name,
            base_model,
            context_length,
            input_price,
            output_price,
            vision,
            reasoning,
            is_default,
        }
    }
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_models)
        .service(vision_capable_models)
        .service(vision_model_mapping)
        .service(reasoning_capable_models)
        .service(reasoning_model_mapping)
        .service(list_embedding_models)
        .service(default_embedding_model)
        .service(encode_chunks);
}

#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = Vec<Model>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models")]
pub async fn list_models(api: Api) -> HttpResult<web::Json<Vec<Model>>> {
    let list = api.chat().list_models(Empty {}).await?.into_inner();
    Ok(web::Json(
        list.models.into_iter().map(Model::from).collect(),
    ))
}

async fn chat_models(api: &Api) -> HttpResult<Vec<pb::Model>> {
    Ok(api.chat().list_models(Empty {}).await?.into_inner().models)
}

/// The ids of the models that are `capable`, in the list's order.
fn capable_names(models: &[pb::Model], capable: fn(&pb::Model) -> bool) -> Vec<String> {
    models
        .iter()
        .filter(|m| capable(m))
        .map(|m| m.id.clone())
        .collect()
}

/// What each model turns to when the capability is asked for `auto`: itself when it is
/// capable, else the capable model `auto` would pick (the default when it is capable, else
/// the first capable one). Empty when no model is capable.
fn capable_mapping(
    models: &[pb::Model],
    capable: fn(&pb::Model) -> bool,
) -> BTreeMap<String, String> {
    let fallback = models
        .iter()
        .find(|m| m.is_default && capable(m))
        .or_else(|| models.iter().find(|m| capable(m)));
    let Some(fallback) = fallback else {
        return BTreeMap::new();
    };
    models
        .iter()
        .map(|m| {
            let to = if capable(m) { &m.id } else { &fallback.id };
            (m.id.clone(), to.clone())
        })
        .collect()
}

fn vision(m: &pb::Model) -> bool {
    m.vision
}

fn reasoning(m: &pb::Model) -> bool {
    m.reasoning
}

/// The models that read images (`vision = true` in the models file).
#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = Vec<String>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models/vision_capable_model_names")]
pub async fn vision_capable_models(api: Api) -> HttpResult<web::Json<Vec<String>>> {
    Ok(web::Json(capable_names(&chat_models(&api).await?, vision)))
}

/// Each model's vision model when `auto` is asked for one: itself when it reads images,
/// else the default vision model.
#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = BTreeMap<String, String>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models/model_to_vision_model_mapping")]
pub async fn vision_model_mapping(api: Api) -> HttpResult<web::Json<BTreeMap<String, String>>> {
    Ok(web::Json(capable_mapping(
        &chat_models(&api).await?,
        vision,
    )))
}

/// The reasoning models (`reasoning = true` in the models file).
#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = Vec<String>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models/reasoning_capable_model_names")]
pub async fn reasoning_capable_models(api: Api) -> HttpResult<web::Json<Vec<String>>> {
    Ok(web::Json(capable_names(
        &chat_models(&api).await?,
        reasoning,
    )))
}

/// Each model's reasoning model when `auto` is asked for one: itself when it reasons, else
/// the default reasoning model.
#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = BTreeMap<String, String>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models/model_to_reasoning_model_mapping")]
pub async fn reasoning_model_mapping(api: Api) -> HttpResult<web::Json<BTreeMap<String, String>>> {
    Ok(web::Json(capable_mapping(
        &chat_models(&api).await?,
        reasoning,
    )))
}

/// An embedding model a collection may name as its `embedding_model`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddingModel {
    pub id: String,
    pub display_name: String,
    /// Its vector size and how much of a chunk it reads.
    pub description: String,
    /// Languages it was trained for (ISO 639-1); empty when not known.
    pub languages: Vec<String>,
    /// What a collection created without `embedding_model` uses.
    pub is_default: bool,
}

impl From<ingest::EmbeddingModel> for EmbeddingModel {
    fn from(m: ingest::EmbeddingModel) -> Self {
        let ingest::EmbeddingModel {
            name,
            dimension,
            max_tokens,
            is_default,
            languages,
        } = m;
        let size = if dimension == 0 {
            "vectors of the size its upstream answers".to_owned()
        } else {
            format!("{dimension}-dimensional vectors")
        };
        EmbeddingModel {
            display_name: name.clone(),
            id: name,
            description: format!("{size}; reads up to {max_tokens} tokens of a chunk"),
            languages,
            is_default,
        }
    }
}

async fn embedding_models(api: &Api) -> HttpResult<Vec<EmbeddingModel>> {
    let list = api
        .ingest()
        .list_embedding_models(Empty {})
        .await?
        .into_inner();
    Ok(list.models.into_iter().map(EmbeddingModel::from).collect())
}

/// The embedding models, the default first.
#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = Vec<EmbeddingModel>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/embedding_models")]
pub async fn list_embedding_models(api: Api) -> HttpResult<web::Json<Vec<EmbeddingModel>>> {
    Ok(web::Json(embedding_models(&api).await?))
}

/// The embedding model new collections use unless they name one.
#[utoipa::path(
    tag = "Models",
    responses(
        (status = 200, body = EmbeddingModel),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no embedding model is configured"),
    ),
    security(("bearer" = []))
)]
#[get("/embedding_models/default")]
pub async fn default_embedding_model(api: Api) -> HttpResult<web::Json<EmbeddingModel>> {
    embedding_models(&api)
        .await?
        .into_iter()
        .find(|m| m.is_default)
        .map(web::Json)
        .ok_or_else(|| ApiError::not_found("no embedding model is configured").into())
}

/// Texts to encode (the client's EncodeChunksForRetrievalRequest).
#[derive(Debug, Deserialize, ToSchema)]
pub struct EncodeChunks {
    /// 1 to 256 texts.
    pub chunks: Vec<String>,
}

/// The vectors retrieval would compute for `chunks` with an embedding model (unit length;
/// a text longer than the model reads is cut), in order.
#[utoipa::path(
    tag = "Models",
    params(("model_id" = String, Path, description = "an embedding model's id (GET /embedding_models)")),
    request_body = EncodeChunks,
    responses(
        (status = 200, body = Vec<Vec<f32>>),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "unknown embedding model", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/embedding_models/{model_id}/encode_chunks_for_retrieval")]
pub async fn encode_chunks(
    api: Api,
    path: web::Path<String>,
    body: web::Json<EncodeChunks>,
) -> HttpResult<web::Json<Vec<Vec<f32>>>> {
    let request = ingest::EmbedRequest {
        model: path.into_inner(),
        texts: body.into_inner().chunks,
    };
    let reply = api.ingest().embed(request).await?.into_inner();
    Ok(web::Json(
        reply.vectors.into_iter().map(|v| v.values).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, vision: bool, reasoning: bool, is_default: bool) -> pb::Model {
        pb::Model {
            id: id.into(),
            vision,
            reasoning,
            is_default,
            ..Default::default()
        }
    }

    #[test]
    fn capable_models_map_to_themselves_and_others_to_the_preferred_capable_one() {
        let models = [
            model("plain", false, false, true),
            model("eyes", true, false, false),
            model("eyes2", true, true, false),
        ];
        assert_eq!(capable_names(&models, vision), ["eyes", "eyes2"]);
        assert_eq!(capable_names(&models, reasoning), ["eyes2"]);
        let map = capable_mapping(&models, vision);
        assert_eq!(map["plain"], "eyes");
        assert_eq!(map["eyes"], "eyes");
        assert_eq!(map["eyes2"], "eyes2");
        assert_eq!(capable_mapping(&models, reasoning)["eyes"], "eyes2");
        // The default, when capable, is the one the others turn to.
        let models = [
            model("a", true, false, false),
            model("b", true, false, true),
            model("c", false, false, false),
        ];
        assert_eq!(capable_mapping(&models, vision)["c"], "b");
        assert!(capable_mapping(&[model("x", false, false, true)], vision).is_empty());
    }
}
