//! /api/v1/models

use actix_web::{get, web};
use docchat_proto::chat::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::Serialize;
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
            is_default,
        }
    }
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_models);
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
