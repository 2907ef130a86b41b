//! /api/v1/agents: the built-in agent tools, the caller's tool preference and the agents
//! (the built-in agent types; custom agents join them later).

use actix_web::{HttpResponse, delete, get, post, web};
use docchat_proto::agent::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_agent_tools)
        .service(get_agent_tool_preference)
        .service(update_agent_tool_preference)
        .service(delete_agent_tool_preference)
        .service(list_agents);
}

/// The API keys a tool needs, may use, or has from the server.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolApiKeys {
    pub required: Vec<String>,
    pub optional: Vec<String>,
    pub internal: Vec<String>,
}

/// A tool the agent can use.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentTool {
    pub name: String,
    pub description: String,
    /// Usable on this server (fetch_url can be turned off, document search needs ingest).
    pub enabled: bool,
    /// Offered when agent_tools is `auto` and the caller has no preference.
    pub default: bool,
    /// Whether the tool takes API keys of the caller's.
    pub extendable: bool,
    pub api_keys: ToolApiKeys,
}

impl From<pb::Tool> for AgentTool {
    fn from(t: pb::Tool) -> Self {
        let keys = t.api_keys.unwrap_or_default();
        AgentTool {
            name: t.name,
            description: t.description,
            enabled: t.enabled,
            default: t.default,
            extendable: t.extendable,
            api_keys: ToolApiKeys {
                required: keys.required,
                optional: keys.optional,
                internal: keys.internal,
            },
        }
    }
}

/// The tools used when agent_tools is `auto`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ToolPreference {
    /// Tool names (GET /api/v1/agents/tools); an empty list clears the preference.
    pub reference_value: Vec<String>,
}

/// An agent's key associations by requirement (none for the built-in agents): required,
/// optional (with or without a default), custom (added after the upload).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct AgentApiKeys {
    pub optional: Vec<AgentKeyAssociation>,
    pub required: Vec<AgentKeyAssociation>,
    pub custom: Vec<AgentKeyAssociation>,
}

/// A declared environment key and the stored key given for it (null while none is).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentKeyAssociation {
    /// The env_key_name.
    pub name: String,
    pub associated_key: Option<AssociatedKey>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssociatedKey {
    pub id: String,
    pub name: Option<String>,
    pub owner_email: Option<String>,
}

impl AgentApiKeys {
    fn grouped(keys: Vec<pb::KeyAssociation>) -> AgentApiKeys {
        let mut out = AgentApiKeys::default();
        for k in keys {
            let group = match k.requirement_type.as_str() {
                "required" => &mut out.required,
                "custom" => &mut out.custom,
                _ => &mut out.optional,
            };
            group.push(AgentKeyAssociation {
                name: k.env_key_name,
                associated_key: k.key_id.map(|id| AssociatedKey {
                    id,
                    name: k.key_name,
                    owner_email: k.owner_email,
                }),
            });
        }
        out
    }
}

/// An agent callers can name as llm_args.agent_type.
#[derive(Debug, Serialize, ToSchema)]
pub struct Agent {
    pub id: String,
    /// What agent_type takes.
    pub value: String,
    pub label: String,
    pub enabled: bool,
    /// `built_in`, or the framework of a custom agent.
    #[serde(rename = "type")]
    pub kind: String,
    /// The owner's email; null for built-in agents.
    pub owner: Option<String>,
    pub description: String,
    pub api_keys: AgentApiKeys,
    /// Custom agents' declared MCP servers.
    pub mcp_servers: Vec<super::custom_agents::AgentMcpServer>,
}

impl From<pb::Agent> for Agent {
    fn from(a: pb::Agent) -> Self {
        Agent {
            id: a.id,
            value: a.value,
            label: a.label,
            enabled: a.enabled,
            kind: a.r#type,
            owner: Some(a.owner).filter(|o| !o.is_empty()),
            description: a.description,
            api_keys: AgentApiKeys::grouped(a.api_keys),
            mcp_servers: a.mcp_servers.into_iter().map(Into::into).collect(),
        }
    }
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = Vec<AgentTool>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/tools")]
pub async fn list_agent_tools(api: Api) -> HttpResult<web::Json<Vec<AgentTool>>> {
    let tools = api.agent().list_tools(Empty {}).await?.into_inner().tools;
    Ok(web::Json(tools.into_iter().map(AgentTool::from).collect()))
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, description = "the caller's preferred tool names (empty: none set)", body = Vec<String>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/tool_preference")]
pub async fn get_agent_tool_preference(api: Api) -> HttpResult<web::Json<Vec<String>>> {
    let pref = api
        .agent()
        .get_tool_preference(Empty {})
        .await?
        .into_inner();
    Ok(web::Json(pref.tools))
}

#[utoipa::path(tag = "Agents", request_body = ToolPreference,
    responses((status = 204, description = "set"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/tool_preference")]
pub async fn update_agent_tool_preference(
    api: Api,
    body: web::Json<ToolPreference>,
) -> HttpResult<HttpResponse> {
    let tools = body.into_inner().reference_value;
    api.agent()
        .set_tool_preference(pb::ToolPreference { tools })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Agents",
    responses((status = 204, description = "cleared"), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/agents/tool_preference")]
pub async fn delete_agent_tool_preference(api: Api) -> HttpResult<HttpResponse> {
    api.agent().delete_tool_preference(Empty {}).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Agents",
    responses((status = 200, body = Vec<Agent>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents")]
pub async fn list_agents(api: Api) -> HttpResult<web::Json<Vec<Agent>>> {
    let agents = api.agent().list_agents(Empty {}).await?.into_inner().agents;
    Ok(web::Json(agents.into_iter().map(Agent::from).collect()))
}
