//! The wire forms of custom agents: the detail (GET custom_agents), the all-agents item
//! (GET /agents) and key associations, assembled from the rows with the caller's tools and
//! keys (names only: a key's value never leaves [`super::keys`]).

use docchat_common::error::ApiResult;
use docchat_proto::agent::v1 as pb;
use sea_orm::DatabaseConnection;

use super::store::{self, AgentRow, KeyAssoc};
use super::{keys, tools, upload};

/// What an agent's wire forms are made of, read once per request.
pub struct Context {
    pub tools: Vec<tools::ToolRow>,
    pub keys: Vec<pb::AgentKey>,
    pub tool_assoc: Vec<store::ToolAssoc>,
    pub key_assoc: Vec<KeyAssoc>,
}

impl Context {
    pub async fn load(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Context> {
        Ok(Context {
            tools: tools::of_owner(db, owner_id).await?,
            keys: keys::list(db, owner_id).await?,
            tool_assoc: store::tool_associations(db, owner_id, None).await?,
            key_assoc: store::key_associations(db, owner_id, None).await?,
        })
    }

    pub fn key_assoc_pb(&self, k: &KeyAssoc, owner_id: &str) -> pb::KeyAssociation {
        let key = k
            .key_id
            .as_deref()
            .and_then(|id| self.keys.iter().find(|s| s.id == id));
        pb::KeyAssociation {
            id: k.id.clone(),
            agent_id: k.agent_id.clone(),
            env_key_name: k.env_key_name.clone(),
            key_id: key.map(|s| s.id.clone()),
            user_id: owner_id.to_owned(),
            requirement_type: k.requirement_type.clone(),
            key_name: key.map(|s| s.name.clone()),
            owner_email: key.map(|s| s.owner_email.clone()),
        }
    }

    fn servers(&self, a: &AgentRow) -> Vec<pb::AgentMcpServer> {
        self.tool_assoc
            .iter()
            .filter(|t| t.agent_id == a.id)
            .map(|t| {
                let args = a
                    .servers
                    .iter()
                    .find(|d| d.name == t.mcp_server_name)
                    .map(|d| d.args.to_string())
                    .unwrap_or_else(|| "{}".into());
                let tool = t
                    .tool_id
                    .as_deref()
                    .and_then(|id| self.tools.iter().find(|r| r.id == id));
                pb::AgentMcpServer {
                    tool_name: t.mcp_server_name.clone(),
                    tool_args: args,
                    associated_tool: tool.map(|r| pb::AssociatedTool {
                        id: r.id.clone(),
                        name: r.tool_name.clone(),
                        owner_email: r.owner_email.clone(),
                        description: r.description(),
                    }),
                }
            })
            .collect()
    }

    fn api_keys(&self, a: &AgentRow) -> Vec<pb::KeyAssociation> {
        self.key_assoc
            .iter()
            .filter(|k| k.agent_id == a.id)
            .map(|k| self.key_assoc_pb(k, &a.owner_id))
            .collect()
    }

    pub fn detail(&self, a: &AgentRow) -> pb::CustomAgent {
        pb::CustomAgent {
            id: a.id.clone(),
            agent_name: a.agent_name.clone(),
            agent_type: a.agent_type.clone(),
            agent_args_json: a.agent_args.to_string(),
            owner_email: a.owner_email.clone(),
            mcp_servers: self.servers(a),
            api_keys: self.api_keys(a),
        }
    }

    /// The item of GET /agents: enabled when every required key is given.
    pub fn listed(&self, a: &AgentRow) -> pb::Agent {
        let api_keys = self.api_keys(a);
        let enabled = api_keys
            .iter()
            .all(|k| k.requirement_type != "required" || k.key_id.is_some());
        let description = a
            .agent_args
            .get("description")
            .and_then(|d| d.as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| a.description.clone());
        pb::Agent {
            id: a.id.clone(),
            value: a.agent_name.clone(),
            label: a.agent_name.clone(),
            enabled,
            r#type: upload::client_type(&a.agent_type).to_owned(),
            owner: a.owner_email.clone(),
            description,
            api_keys,
            mcp_servers: self.servers(a),
        }
    }
}

/// The caller's custom agents as GET /agents lists them.
pub async fn listed(db: &DatabaseConnection, owner_id: &str) -> ApiResult<Vec<pb::Agent>> {
    let agents = store::agents(db, owner_id, None, None).await?;
    if agents.is_empty() {
        return Ok(Vec::new());
    }
    let ctx = Context::load(db, owner_id).await?;
    Ok(agents.iter().map(|a| ctx.listed(a)).collect())
}
