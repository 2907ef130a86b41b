//! /api/v1/agents/keys: the caller's stored keys, which custom agents' key associations name
//! (the client's create_agent_key, list_agent_keys, update_agent_key, delete_agent_keys).
//! Values are write-only: no answer carries them.

use actix_web::{HttpResponse, delete, get, post, web};
use docchat_proto::agent::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::comma_list;
use crate::auth::AgentsApi;
use crate::error::{ErrorBody, TerseResult};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_agent_keys)
        .service(create_agent_key)
        .service(update_agent_key)
        .service(delete_agent_keys);
}

/// A stored key, without its value.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentKey {
    pub id: String,
    pub name: String,
    /// private | shared | built_in
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub owner_email: String,
}

impl From<pb::AgentKey> for AgentKey {
    fn from(k: pb::AgentKey) -> Self {
        AgentKey {
            id: k.id,
            name: k.name,
            kind: k.r#type,
            description: k.description,
            created_at: k.created_at,
            updated_at: k.updated_at,
            owner_email: k.owner_email,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewAgentKey {
    pub name: String,
    /// private | shared
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentKeyUpdate {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub value: Option<String>,
    pub description: Option<String>,
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = Vec<AgentKey>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/keys")]
pub async fn list_agent_keys(api: AgentsApi) -> TerseResult<web::Json<Vec<AgentKey>>> {
    let list = api.custom_agents().list_keys(Empty {}).await?;
    Ok(web::Json(
        list.into_inner().keys.into_iter().map(Into::into).collect(),
    ))
}

#[utoipa::path(tag = "Agents", request_body = NewAgentKey,
    responses((status = 200, body = AgentKey), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/keys")]
pub async fn create_agent_key(
    api: AgentsApi,
    body: web::Json<NewAgentKey>,
) -> TerseResult<web::Json<AgentKey>> {
    let b = body.into_inner();
    let key = api
        .custom_agents()
        .create_key(pb::NewAgentKey {
            name: b.name,
            r#type: b.kind,
            value: b.value,
            description: b.description.unwrap_or_default(),
        })
        .await?;
    Ok(web::Json(key.into_inner().into()))
}

#[utoipa::path(tag = "Agents", request_body = AgentKeyUpdate,
    responses((status = 200, body = AgentKey), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/keys/{key_id}")]
pub async fn update_agent_key(
    api: AgentsApi,
    path: web::Path<String>,
    body: web::Json<AgentKeyUpdate>,
) -> TerseResult<web::Json<AgentKey>> {
    let b = body.into_inner();
    let key = api
        .custom_agents()
        .update_key(pb::AgentKeyUpdate {
            id: path.into_inner(),
            name: b.name,
            r#type: b.kind,
            value: b.value,
            description: b.description,
        })
        .await?;
    Ok(web::Json(key.into_inner().into()))
}

#[utoipa::path(tag = "Agents",
    params(("key_ids" = String, Path, description = "comma-separated ids")),
    responses((status = 204, description = "deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody, description = "an id is not one of the caller's keys; nothing was deleted")),
    security(("bearer" = [])))]
#[delete("/agents/keys/{key_ids}")]
pub async fn delete_agent_keys(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<HttpResponse> {
    api.custom_agents()
        .delete_keys(pb::Ids {
            ids: comma_list(&path),
        })
        .await?;
    // The client's delete_agent_keys expects 204.
    Ok(HttpResponse::NoContent().finish())
}
