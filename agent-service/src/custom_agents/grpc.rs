//! CustomAgentService over gRPC (extensions.proto): uploads, reads and writes of the caller's
//! custom agents, their associations and stored keys. Permissions as SPEC.md says: writes
//! need ManageCustomAgent, deletes of agents DeleteCustomAgent, suggestions ConfigureAgents;
//! reads a valid caller only. Anything not the caller's is NOT_FOUND.

use docchat_common::auth::{caller, permissions};
use docchat_common::error::ApiError;
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::custom_agent_service_server::CustomAgentService;
use docchat_proto::common::v1::Empty;
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use super::keys::KeyStore;
use super::store::{self, ToolAssoc};
use super::tools;
use super::upload::{self, MAX_UPLOAD};
use super::view::Context;

#[derive(Clone)]
pub struct CustomAgentGrpc {
    pub db: DatabaseConnection,
    pub keys: KeyStore,
}

/// agent_args as sent: at most `limits::JSON_BYTES` (413), then a JSON object (400).
fn object(json: &str, message: &str) -> Result<serde_json::Value, ApiError> {
    docchat_common::limits::check_json("agent_args", json)?;
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        _ => Err(ApiError::bad_request(message)),
    }
}

const BAD_ARGS: &str = "Invalid JSON format for agent_args.";

impl CustomAgentGrpc {
    /// Deletes the caller's associations of `table` named in the request (ManageCustomAgent);
    /// another user's ids count 0.
    async fn delete_associations(
        &self,
        request: Request<pb::Ids>,
        kind: store::Associations,
    ) -> Result<Response<pb::Count>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::MANAGE_CUSTOM_AGENT)?;
        let count =
            store::delete_associations(&self.db, kind, &caller.user_id, &request.get_ref().ids)
                .await?;
        Ok(Response::new(pb::Count { count }))
    }
}

#[tonic::async_trait]
impl CustomAgentService for CustomAgentGrpc {
    async fn create_custom_agents(
        &self,
        request: Request<pb::CustomAgentUpload>,
    ) -> Result<Response<pb::CreatedIds>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::MANAGE_CUSTOM_AGENT)?;
        let up = request.into_inner();
        if up.file.is_empty() && up.file_name.is_empty() {
            return Err(ApiError::bad_request("The request does not contain a file.").into());
        }
        upload::check_extension(&up.file_name)?;
        if up.file.len() > MAX_UPLOAD {
            return Err(upload::too_large().into());
        }
        let agent_type = upload::stored_type(&up.agent_type).ok_or_else(|| {
            ApiError::bad_request(format!(
                "agent_type must be one of framework_1, framework_2, framework_3, framework_4 (or langgraph, crewai, openai, claude), not {:?}",
                up.agent_type
            ))
        })?;
        let args = if up.agent_args_json.trim().is_empty() {
            serde_json::json!({})
        } else {
            object(&up.agent_args_json, BAD_ARGS)?
        };
        let folders = upload::read(&up.file, &up.file_name, up.agent_name.as_deref())?;
        let mut ids = Vec::new();
        for f in &folders {
            ids.push(store::save(&self.db, &caller, agent_type, &args, f).await?);
        }
        Ok(Response::new(pb::CreatedIds { ids }))
    }

    async fn list_custom_agents(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::CustomAgentList>, Status> {
        let caller = caller(&request)?;
        let agents = store::agents(&self.db, &caller.user_id, None, None).await?;
        let ctx = Context::load(&self.db, &caller.user_id).await?;
        Ok(Response::new(pb::CustomAgentList {
            agents: agents.iter().map(|a| ctx.detail(a)).collect(),
        }))
    }

    async fn get_custom_agent(
        &self,
        request: Request<pb::IdRef>,
    ) -> Result<Response<pb::CustomAgent>, Status> {
        let caller = caller(&request)?;
        let a = store::agent(&self.db, &caller.user_id, &request.get_ref().id).await?;
        let ctx = Context::load(&self.db, &caller.user_id).await?;
        Ok(Response::new(ctx.detail(&a)))
    }

    async fn update_custom_agent(
        &self,
        request: Request<pb::CustomAgentUpdate>,
    ) -> Result<Response<pb::IdRef>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::MANAGE_CUSTOM_AGENT)?;
        let u = request.into_inner();
        if u.agent_args_json.trim().is_empty() {
            return Err(ApiError::bad_request("agent_args is required.").into());
        }
        let args = object(&u.agent_args_json, BAD_ARGS)?;
        let mapping = if u.mcp_servers_mapping_json.trim().is_empty() {
            serde_json::Map::new()
        } else {
            match serde_json::from_str(&u.mcp_servers_mapping_json) {
                Ok(serde_json::Value::Object(m)) => m,
                Ok(serde_json::Value::Null) => serde_json::Map::new(),
                _ => {
                    return Err(ApiError::bad_request(
                        "mcp_servers_mapping must be an object of server name to tool name or null",
                    )
                    .into());
                }
            }
        };
        store::update(&self.db, &caller, &u.id, &args, &mapping).await?;
        Ok(Response::new(pb::IdRef { id: u.id }))
    }

    async fn delete_custom_agents(
        &self,
        request: Request<pb::Ids>,
    ) -> Result<Response<pb::Count>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::DELETE_CUSTOM_AGENT)?;
        let count = store::delete(&self.db, &caller, &request.get_ref().ids).await?;
        Ok(Response::new(pb::Count { count }))
    }

    async fn suggestions(
        &self,
        request: Request<pb::IdRef>,
    ) -> Result<Response<pb::SuggestionList>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::CONFIGURE_AGENTS)?;
        let a = store::agent(&self.db, &caller.user_id, &request.get_ref().id).await?;
        let tools = tools::of_owner(&self.db, &caller.user_id).await?;
        let mcp: Vec<&tools::ToolRow> = tools
            .iter()
            .filter(|t| t.tool_type.ends_with("_mcp"))
            .collect();
        // Per declared server: the caller's MCP tools, the one of the same name first.
        let suggestions = a
            .servers
            .iter()
            .map(|d| {
                let mut ranked = mcp.clone();
                ranked.sort_by_key(|t| t.tool_name != d.name);
                pb::Suggestion {
                    mcp_servers: ranked
                        .into_iter()
                        .map(|t| pb::SuggestedServer {
                            tool_name: t.tool_name.clone(),
                            tool_args: t.tool_args.clone(),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(pb::SuggestionList { suggestions }))
    }

    async fn list_tool_associations(
        &self,
        request: Request<pb::AssociationFilter>,
    ) -> Result<Response<pb::ToolAssociationList>, Status> {
        let caller = caller(&request)?;
        let f = request.into_inner();
        let agents = store::agents(
            &self.db,
            &caller.user_id,
            f.agent_id.as_deref().filter(|s| !s.is_empty()),
            f.agent_name.as_deref().filter(|s| !s.is_empty()),
        )
        .await?;
        let tools = tools::of_owner(&self.db, &caller.user_id).await?;
        let all = store::tool_associations(&self.db, &caller.user_id, None).await?;
        let associations = all
            .iter()
            .filter_map(|t: &ToolAssoc| {
                let a = agents.iter().find(|a| a.id == t.agent_id)?;
                Some(store::tool_assoc_pb(
                    t,
                    &a.agent_name,
                    &caller.user_id,
                    &tools,
                ))
            })
            .collect();
        Ok(Response::new(pb::ToolAssociationList { associations }))
    }

    async fn create_tool_association(
        &self,
        request: Request<pb::NewToolAssociation>,
    ) -> Result<Response<pb::ToolAssociation>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::MANAGE_CUSTOM_AGENT)?;
        let n = request.into_inner();
        if n.mcp_server_name.trim().is_empty() {
            return Err(ApiError::bad_request("mcp_server_name is required").into());
        }
        let a = store::agent(&self.db, &caller.user_id, &n.agent_id).await?;
        let tools = tools::of_owner(&self.db, &caller.user_id).await?;
        let tool_id = match n.tool_name.as_deref() {
            None => None,
            Some(name) => Some(store::resolve_tool(&tools, name)?.id.clone()),
        };
        let id = store::add_tool_association(
            &self.db,
            &caller.user_id,
            &a.id,
            &n.mcp_server_name,
            tool_id.as_deref(),
        )
        .await?;
        let made = ToolAssoc {
            id,
            agent_id: a.id.clone(),
            mcp_server_name: n.mcp_server_name,
            tool_id,
        };
        Ok(Response::new(store::tool_assoc_pb(
            &made,
            &a.agent_name,
            &caller.user_id,
            &tools,
        )))
    }

    async fn delete_tool_associations(
        &self,
        request: Request<pb::Ids>,
    ) -> Result<Response<pb::Count>, Status> {
        self.delete_associations(request, store::Associations::Tool)
            .await
    }

    async fn list_key_associations(
        &self,
        request: Request<pb::AssociationFilter>,
    ) -> Result<Response<pb::KeyAssociationList>, Status> {
        let caller = caller(&request)?;
        let f = request.into_inner();
        let agents = store::agents(
            &self.db,
            &caller.user_id,
            f.agent_id.as_deref().filter(|s| !s.is_empty()),
            f.agent_name.as_deref().filter(|s| !s.is_empty()),
        )
        .await?;
        let ctx = Context::load(&self.db, &caller.user_id).await?;
        let associations = ctx
            .key_assoc
            .iter()
            .filter(|k| agents.iter().any(|a| a.id == k.agent_id))
            .map(|k| ctx.key_assoc_pb(k, &caller.user_id))
            .collect();
        Ok(Response::new(pb::KeyAssociationList { associations }))
    }

    /// A declared key gets the stored key; a name the agent does not declare becomes a
    /// `custom` association.
    async fn create_key_association(
        &self,
        request: Request<pb::NewKeyAssociation>,
    ) -> Result<Response<pb::KeyAssociation>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(permissions::MANAGE_CUSTOM_AGENT)?;
        let n = request.into_inner();
        if n.env_key_name.trim().is_empty() {
            return Err(ApiError::bad_request("env_key_name is required").into());
        }
        let a = store::agent(&self.db, &caller.user_id, &n.agent_id).await?;
        self.keys.get(&caller, &n.key_id).await?;
        let existing = store::key_associations(&self.db, &caller.user_id, Some(&a.id)).await?;
        let id = match existing.iter().find(|k| k.env_key_name == n.env_key_name) {
            Some(k) => {
                store::give_key(&self.db, &caller.user_id, &k.id, &n.key_id).await?;
                k.id.clone()
            }
            None => {
                store::add_key_association(
                    &self.db,
                    &caller.user_id,
                    &a.id,
                    &n.env_key_name,
                    Some(&n.key_id),
                    "custom",
                    None,
                )
                .await?
            }
        };
        let ctx = Context::load(&self.db, &caller.user_id).await?;
        let made = ctx
            .key_assoc
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| ApiError::not_found(format!("key association {id} not found")))?;
        Ok(Response::new(ctx.key_assoc_pb(made, &caller.user_id)))
    }

    async fn delete_key_associations(
        &self,
        request: Request<pb::Ids>,
    ) -> Result<Response<pb::Count>, Status> {
        self.delete_associations(request, store::Associations::Key)
            .await
    }

    async fn list_keys(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::AgentKeyList>, Status> {
        let caller = caller(&request)?;
        Ok(Response::new(pb::AgentKeyList {
            keys: self.keys.list(&caller).await?,
        }))
    }

    async fn create_key(
        &self,
        request: Request<pb::NewAgentKey>,
    ) -> Result<Response<pb::AgentKey>, Status> {
        let caller = caller(&request)?;
        Ok(Response::new(
            self.keys.create(&caller, request.into_inner()).await?,
        ))
    }

    async fn update_key(
        &self,
        request: Request<pb::AgentKeyUpdate>,
    ) -> Result<Response<pb::AgentKey>, Status> {
        let caller = caller(&request)?;
        Ok(Response::new(
            self.keys.update(&caller, request.into_inner()).await?,
        ))
    }

    async fn delete_keys(&self, request: Request<pb::Ids>) -> Result<Response<pb::Count>, Status> {
        let caller = caller(&request)?;
        let count = self.keys.delete(&caller, &request.get_ref().ids).await?;
        Ok(Response::new(pb::Count { count }))
    }
}
