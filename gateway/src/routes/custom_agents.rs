//! /api/v1/agents/custom_agents and their tool and key associations (SPEC.md "Custom
//! agents"): thin handlers over agent-service's CustomAgentService. Errors are SPEC.md's
//! custom-agent bodies ([`TerseResult`]: a 401 says only `Unauthorized`); the permission
//! checks are the service's, so every client of it gets the same rules (the gateway checks
//! only where a body would otherwise be read first).

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use docchat_common::auth::permissions;
use docchat_proto::agent::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{Count, comma_list};
use crate::auth::AgentsApi;
use crate::error::{ErrorBody, HttpError, TerseResult, bad_request};
use crate::form::{self, FormReader};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(add_custom_agent)
        .service(list_custom_agents)
        .service(get_custom_agent)
        .service(update_custom_agent)
        .service(delete_custom_agent)
        .service(get_custom_agent_suggestions)
        .service(list_custom_agent_tool_associations)
        .service(create_custom_agent_tool_association)
        .service(delete_custom_agent_tool_associations)
        .service(list_custom_agent_key_associations)
        .service(create_custom_agent_key_association)
        .service(delete_custom_agent_key_associations);
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedAgent {
    pub agent_custom_agent_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssociatedTool {
    pub id: String,
    pub name: String,
    pub owner_email: String,
    pub description: String,
}

/// A declared MCP server of an agent and the tool serving it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentMcpServer {
    pub tool_name: String,
    /// The declaration's arguments, as a JSON string.
    pub tool_args: String,
    pub associated_tool: Option<AssociatedTool>,
}

impl From<pb::AgentMcpServer> for AgentMcpServer {
    fn from(s: pb::AgentMcpServer) -> Self {
        AgentMcpServer {
            tool_name: s.tool_name,
            tool_args: s.tool_args,
            associated_tool: s.associated_tool.map(|t| AssociatedTool {
                id: t.id,
                name: t.name,
                owner_email: t.owner_email,
                description: t.description,
            }),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyAssociation {
    pub id: String,
    pub agent_id: String,
    pub env_key_name: String,
    pub key_id: Option<String>,
    pub user_id: String,
    /// required | optional_with_default | optional_no_default | custom
    pub requirement_type: String,
    pub key_name: Option<String>,
    pub owner_email: Option<String>,
}

impl From<pb::KeyAssociation> for KeyAssociation {
    fn from(k: pb::KeyAssociation) -> Self {
        KeyAssociation {
            id: k.id,
            agent_id: k.agent_id,
            env_key_name: k.env_key_name,
            key_id: k.key_id,
            user_id: k.user_id,
            requirement_type: k.requirement_type,
            key_name: k.key_name,
            owner_email: k.owner_email,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CustomAgent {
    pub id: String,
    pub agent_name: String,
    /// langgraph | crewai | openai | claude
    pub agent_type: String,
    pub agent_args: Value,
    pub owner_email: String,
    pub mcp_servers: Vec<AgentMcpServer>,
    pub api_keys: Vec<KeyAssociation>,
}

impl From<pb::CustomAgent> for CustomAgent {
    fn from(a: pb::CustomAgent) -> Self {
        CustomAgent {
            id: a.id,
            agent_name: a.agent_name,
            agent_type: a.agent_type,
            agent_args: serde_json::from_str(&a.agent_args_json)
                .unwrap_or_else(|_| Value::Object(Default::default())),
            owner_email: a.owner_email,
            mcp_servers: a.mcp_servers.into_iter().map(Into::into).collect(),
            api_keys: a.api_keys.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateCustomAgent {
    pub agent_args: Option<Value>,
    /// Server name → tool name; null clears that server's tool.
    pub mcp_servers_mapping: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UpdatedAgent {
    pub agent_custom_agent_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedCount {
    pub deleted_count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SuggestedServer {
    pub tool_name: String,
    /// A JSON string.
    pub tool_args: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Suggestion {
    pub mcp_servers: Vec<SuggestedServer>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ToolAssociation {
    pub id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub tool_id: Option<String>,
    pub tool_name: Option<String>,
    pub mcp_server_name: String,
    pub user_id: String,
}

impl From<pb::ToolAssociation> for ToolAssociation {
    fn from(t: pb::ToolAssociation) -> Self {
        ToolAssociation {
            id: t.id,
            agent_id: t.agent_id,
            agent_name: t.agent_name,
            tool_id: t.tool_id,
            tool_name: t.tool_name,
            mcp_server_name: t.mcp_server_name,
            user_id: t.user_id,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct AssociationQuery {
    pub agent_id: Option<String>,
    pub agent_name: Option<String>,
}

impl AssociationQuery {
    fn filter(self) -> pb::AssociationFilter {
        pb::AssociationFilter {
            agent_id: self.agent_id.filter(|s| !s.is_empty()),
            agent_name: self.agent_name.filter(|s| !s.is_empty()),
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewToolAssociation {
    pub agent_id: String,
    pub mcp_server_name: String,
    /// Omitted or null: an unresolved association.
    pub tool_name: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewKeyAssociation {
    pub agent_id: String,
    pub env_key_name: String,
    pub key_id: String,
}

/// The parts of POST custom_agents; the file is read up to the limit and no further.
async fn read_upload(form: FormReader) -> Result<pb::CustomAgentUpload, HttpError> {
    let mut form = form.read_all(form::MAX_FILE).await?;
    let Some((file_name, file)) = form.file.take() else {
        return Err(bad_request(form::NO_FILE));
    };
    let mut text = |name: &str| form.texts.remove(name).unwrap_or_default();
    Ok(pb::CustomAgentUpload {
        file_name,
        file,
        agent_type: text("agent_type"),
        agent_args_json: text("agent_args"),
        agent_name: Some(text("agent_name")).filter(|n| !n.trim().is_empty()),
    })
}

#[utoipa::path(tag = "Agents",
    request_body(content_type = "multipart/form-data", description = "parts file (.zip), agent_type, agent_args (JSON), agent_name"),
    responses((status = 201, body = Vec<CreatedAgent>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/custom_agents")]
pub async fn add_custom_agent(
    api: AgentsApi,
    req: HttpRequest,
    payload: web::Payload,
) -> TerseResult<HttpResponse> {
    // Before the body is read (up to 20 MB): agent-service checks again.
    api.require(permissions::MANAGE_CUSTOM_AGENT)?;
    let max_body = api.state().config.max_body_bytes;
    let up = read_upload(FormReader::open(&req, payload, max_body)?).await?;
    let ids = api.custom_agents().create_custom_agents(up).await?;
    let out: Vec<CreatedAgent> = ids
        .into_inner()
        .ids
        .into_iter()
        .map(|agent_custom_agent_id| CreatedAgent {
            agent_custom_agent_id,
        })
        .collect();
    Ok(HttpResponse::Created().json(out))
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = Vec<CustomAgent>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/custom_agents")]
pub async fn list_custom_agents(api: AgentsApi) -> TerseResult<web::Json<Vec<CustomAgent>>> {
    let list = api.custom_agents().list_custom_agents(Empty {}).await?;
    Ok(web::Json(
        list.into_inner()
            .agents
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = CustomAgent), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/custom_agents/{agent_id}")]
pub async fn get_custom_agent(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<web::Json<CustomAgent>> {
    let id = path.into_inner();
    let a = api
        .custom_agents()
        .get_custom_agent(pb::IdRef { id })
        .await?;
    Ok(web::Json(a.into_inner().into()))
}

/// Whether the request says it carries a body (a length above zero, or chunks).
fn has_body(req: &HttpRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(actix_web::http::header::TRANSFER_ENCODING)
        || headers
            .get(actix_web::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

#[utoipa::path(tag = "Agents", request_body = UpdateCustomAgent,
    responses((status = 200, body = UpdatedAgent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/agents/custom_agents/{agent_id}")]
pub async fn update_custom_agent(
    api: AgentsApi,
    path: web::Path<String>,
    req: HttpRequest,
    body: Result<web::Json<UpdateCustomAgent>, actix_web::Error>,
) -> TerseResult<web::Json<UpdatedAgent>> {
    // Before the body's own errors (an unauthorized caller hears 401 first): agent-service
    // checks again.
    api.require(permissions::MANAGE_CUSTOM_AGENT)?;
    // No body lacks agent_args; a body that is not the request's JSON (nested past the
    // parser's depth, say) gets the JSON reader's own error (JsonConfig's handler).
    let body = match body {
        Ok(body) => Some(body.into_inner()),
        Err(_) if !has_body(&req) => None,
        Err(e) => {
            return Err(match e.as_error::<HttpError>() {
                Some(HttpError(api_error)) => HttpError(api_error.clone()),
                None => bad_request(format!("invalid JSON body: {e}")),
            }
            .into());
        }
    };
    let (args, mapping) = match body {
        Some(UpdateCustomAgent {
            agent_args: Some(args),
            mcp_servers_mapping,
        }) => (args, mcp_servers_mapping),
        _ => return Err(bad_request("agent_args is required.").into()),
    };
    if !args.is_object() {
        return Err(bad_request("Invalid JSON format for agent_args.").into());
    }
    let done = api
        .custom_agents()
        .update_custom_agent(pb::CustomAgentUpdate {
            id: path.into_inner(),
            agent_args_json: args.to_string(),
            mcp_servers_mapping_json: mapping
                .map(|m| Value::Object(m).to_string())
                .unwrap_or_default(),
        })
        .await?;
    Ok(web::Json(UpdatedAgent {
        agent_custom_agent_id: done.into_inner().id,
    }))
}

#[utoipa::path(tag = "Agents",
    params(("agent_ids" = String, Path, description = "comma-separated ids")),
    responses((status = 200, body = Count), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/agents/custom_agents/{agent_ids}")]
pub async fn delete_custom_agent(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<web::Json<Count>> {
    let ids = comma_list(&path);
    let n = api
        .custom_agents()
        .delete_custom_agents(pb::Ids { ids })
        .await?;
    Ok(web::Json(Count::of(n.into_inner().count)))
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = Vec<Suggestion>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/custom_agents/{agent_id}/suggestions")]
pub async fn get_custom_agent_suggestions(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<web::Json<Vec<Suggestion>>> {
    let list = api
        .custom_agents()
        .suggestions(pb::IdRef {
            id: path.into_inner(),
        })
        .await?;
    Ok(web::Json(
        list.into_inner()
            .suggestions
            .into_iter()
            .map(|s| Suggestion {
                mcp_servers: s
                    .mcp_servers
                    .into_iter()
                    .map(|m| SuggestedServer {
                        tool_name: m.tool_name,
                        tool_args: m.tool_args,
                    })
                    .collect(),
            })
            .collect(),
    ))
}

#[utoipa::path(tag = "Agents", params(AssociationQuery),
    responses((status = 200, body = Vec<ToolAssociation>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/custom_agent_tool_associations")]
pub async fn list_custom_agent_tool_associations(
    api: AgentsApi,
    query: web::Query<AssociationQuery>,
) -> TerseResult<web::Json<Vec<ToolAssociation>>> {
    let list = api
        .custom_agents()
        .list_tool_associations(query.into_inner().filter())
        .await?;
    Ok(web::Json(
        list.into_inner()
            .associations
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

#[utoipa::path(tag = "Agents", request_body = NewToolAssociation,
    responses((status = 200, body = ToolAssociation), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/custom_agent_tool_associations")]
pub async fn create_custom_agent_tool_association(
    api: AgentsApi,
    body: web::Json<NewToolAssociation>,
) -> TerseResult<web::Json<ToolAssociation>> {
    let b = body.into_inner();
    let made = api
        .custom_agents()
        .create_tool_association(pb::NewToolAssociation {
            agent_id: b.agent_id,
            mcp_server_name: b.mcp_server_name,
            tool_name: b.tool_name,
        })
        .await?;
    Ok(web::Json(made.into_inner().into()))
}

#[utoipa::path(tag = "Agents",
    params(("association_ids" = String, Path, description = "comma-separated ids")),
    responses((status = 200, body = DeletedCount), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/agents/custom_agent_tool_associations/{association_ids}")]
pub async fn delete_custom_agent_tool_associations(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<web::Json<DeletedCount>> {
    let n = api
        .custom_agents()
        .delete_tool_associations(pb::Ids {
            ids: comma_list(&path),
        })
        .await?;
    Ok(web::Json(DeletedCount {
        deleted_count: n.into_inner().count,
    }))
}

#[utoipa::path(tag = "Agents", params(AssociationQuery),
    responses((status = 200, body = Vec<KeyAssociation>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/custom_agent_key_associations")]
pub async fn list_custom_agent_key_associations(
    api: AgentsApi,
    query: web::Query<AssociationQuery>,
) -> TerseResult<web::Json<Vec<KeyAssociation>>> {
    let list = api
        .custom_agents()
        .list_key_associations(query.into_inner().filter())
        .await?;
    Ok(web::Json(
        list.into_inner()
            .associations
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

#[utoipa::path(tag = "Agents", request_body = NewKeyAssociation,
    responses((status = 200, body = KeyAssociation), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/custom_agent_key_associations")]
pub async fn create_custom_agent_key_association(
    api: AgentsApi,
    body: web::Json<NewKeyAssociation>,
) -> TerseResult<web::Json<KeyAssociation>> {
    let b = body.into_inner();
    let made = api
        .custom_agents()
        .create_key_association(pb::NewKeyAssociation {
            agent_id: b.agent_id,
            env_key_name: b.env_key_name,
            key_id: b.key_id,
        })
        .await?;
    Ok(web::Json(made.into_inner().into()))
}

#[utoipa::path(tag = "Agents",
    params(("association_ids" = String, Path, description = "comma-separated ids")),
    responses((status = 200, body = DeletedCount), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/agents/custom_agent_key_associations/{association_ids}")]
pub async fn delete_custom_agent_key_associations(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<web::Json<DeletedCount>> {
    let n = api
        .custom_agents()
        .delete_key_associations(pb::Ids {
            ids: comma_list(&path),
        })
        .await?;
    Ok(web::Json(DeletedCount {
        deleted_count: n.into_inner().count,
    }))
}
