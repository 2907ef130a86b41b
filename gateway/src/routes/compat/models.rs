//! `GET /compat_api/v1/models`: the configured models in the vendor's list shape.

use actix_web::{HttpResponse, get};
use docchat_proto::common::v1::Empty;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::CompatApi;
use super::error::{CompatResult, ErrorBody};

/// The model list.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatModelList)]
pub struct ModelList {
    object: &'static str,
    data: Vec<ModelObject>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatModelObject)]
pub struct ModelObject {
    id: String,
    object: &'static str,
    created: i64,
    owned_by: &'static str,
    #[schema(value_type = Vec<Permission>)]
    permission: [Permission; 1],
    root: String,
    parent: Option<String>,
    /// Extension: the provider's model id.
    base_model: String,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatPermission)]
pub struct Permission {
    id: String,
    object: &'static str,
    created: i64,
    allow_create_engine: bool,
    allow_sampling: bool,
    allow_logprobs: bool,
    allow_search_indices: bool,
    allow_view: bool,
    allow_fine_tuning: bool,
    organization: &'static str,
    group: Option<String>,
    is_blocking: bool,
}

#[utoipa::path(
    tag = "Compatible API",
    responses(
        (status = 200, body = ModelList),
        (status = 401, body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/models")]
pub async fn models(CompatApi(api): CompatApi) -> CompatResult<HttpResponse> {
    let list = api.chat().list_models(Empty {}).await?.into_inner();
    let created = list.loaded_at;
    let data = list
        .models
        .into_iter()
        .map(|m| ModelObject {
            permission: [Permission {
                id: format!("modelperm-{}", m.id),
                object: "model_permission",
                created,
                allow_create_engine: false,
                allow_sampling: true,
                allow_logprobs: false,
                allow_search_indices: false,
                allow_view: true,
                allow_fine_tuning: false,
                organization: "*",
                group: None,
                is_blocking: false,
            }],
            root: m.id.clone(),
            id: m.id,
            object: "model",
            created,
            owned_by: "docchat",
            parent: None,
            base_model: m.base_model,
        })
        .collect();
    Ok(HttpResponse::Ok().json(ModelList {
        object: "list",
        data,
    }))
}
