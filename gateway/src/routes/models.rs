//! /api/v1/models

use actix_web::{get, web};
use docchat_common::config::Service;
use docchat_proto::chat::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Authed;
use crate::error::{ErrorBody, HttpResult};
use crate::state::AppState;

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

#[utoipa::path(
    tag = "Models",
    responses((status = 200, body = Vec<Model>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/models")]
pub async fn list_models(
    state: web::Data<AppState>,
    caller: Authed,
) -> HttpResult<web::Json<Vec<Model>>> {
    let request = state.request(&caller, Service::Chat, Empty {})?;
    let list = state.chat.clone().list_models(request).await?.into_inner();
    Ok(web::Json(
        list.models.into_iter().map(Model::from).collect(),
    ))
}
