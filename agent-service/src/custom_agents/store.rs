//! Custom agents and their associations in the database. Every read and write is scoped to
//! the caller's user id: another user's agent or association is simply not found.

use chrono::Utc;
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Set,
};
use sha2::{Digest, Sha256};

use super::db_error;
use super::tools::{self, ToolRow};
use super::upload::{AgentFolder, Declared};
use crate::entities::{
    JsonText, Owned, custom_agent_key_associations, custom_agent_tool_associations, custom_agents,
};

/// A custom agent's row, without its folder's bytes.
#[derive(Debug, Clone)]
pub struct AgentRow {
    pub id: String,
    pub owner_id: String,
    pub owner_email: String,
    pub agent_name: String,
    /// The client's framework name.
    pub agent_type: String,
    pub agent_args: serde_json::Value,
    pub description: String,
    pub servers: Vec<Declared>,
    pub command: Vec<String>,
    pub folder_sha256: String,
}

impl From<custom_agents::Head> for AgentRow {
    fn from(r: custom_agents::Head) -> Self {
        AgentRow {
            id: r.id,
            owner_id: r.owner_id,
            owner_email: r.owner_email,
            agent_name: r.agent_name,
            agent_type: r.agent_type,
            agent_args: r.agent_args.0,
            description: r.description,
            servers: r.mcp_servers.0,
            command: r.command.0,
            folder_sha256: r.folder_sha256,
        }
    }
}

fn not_found(what: &str, id: &str) -> ApiError {
    ApiError::not_found(format!("{what} {id} not found"))
}

/// The caller's agents (all of them, or the one with `id`, or the one named `name`).
pub async fn agents(
    db: &DatabaseConnection,
    owner_id: &str,
    id: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Vec<AgentRow>> {
    use custom_agents::Column as C;
    Ok(custom_agents::Entity::find_by_owner(owner_id)
        .apply_if(id, |q, id| q.filter(C::Id.eq(id)))
        .apply_if(name, |q, name| q.filter(C::AgentName.eq(name)))
        .order_by_asc(C::AgentName)
        .order_by_asc(C::Id)
        .into_partial_model::<custom_agents::Head>()
        .all(db)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(AgentRow::from)
        .collect())
}

/// The caller's agent `id`; NOT_FOUND otherwise.
pub async fn agent(db: &DatabaseConnection, owner_id: &str, id: &str) -> ApiResult<AgentRow> {
    agents(db, owner_id, Some(id), None)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| not_found("custom agent", id))
}

/// The ZIP of `owner_id`'s agent `id`'s folder.
pub async fn folder(db: &DatabaseConnection, owner_id: &str, id: &str) -> ApiResult<Vec<u8>> {
    custom_agents::Entity::find_owned(owner_id, id)
        .select_only()
        .column(custom_agents::Column::Folder)
        .into_tuple::<Vec<u8>>()
        .one(db)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found("custom agent", id))
}

/// Stores an uploaded agent folder: a new agent, or (same owner, same name) the upload
/// replaces the earlier one under its id. Its declared servers are associated with the
/// caller's tools of the same name (unresolved otherwise; associations made by hand stay);
/// its declared keys become key associations (a key already given stays given).
pub async fn save(
    db: &DatabaseConnection,
    caller: &Caller,
    agent_type: &str,
    agent_args: &serde_json::Value,
    f: &AgentFolder,
) -> ApiResult<String> {
    let now = Utc::now();
    let sha = hex::encode(Sha256::digest(&f.zip));
    let existing = agents(db, &caller.user_id, None, Some(&f.name)).await?;
    let id = match existing.first() {
        Some(a) => {
            custom_agents::Entity::update_owned(&caller.user_id, &a.id)
                .set(custom_agents::ActiveModel {
                    agent_type: Set(agent_type.to_owned()),
                    agent_args: Set(JsonText(agent_args.clone())),
                    description: Set(f.description.clone()),
                    mcp_servers: Set(JsonText(f.servers.clone())),
                    command: Set(JsonText(f.command.clone())),
                    folder: Set(f.zip.clone()),
                    folder_sha256: Set(sha),
                    updated_at: Set(now),
                    ..Default::default()
                })
                .exec(db)
                .await
                .map_err(db_error)?;
            a.id.clone()
        }
        None => {
            let id = docchat_common::ids::new_id();
            custom_agents::Entity::insert(custom_agents::ActiveModel {
                id: Set(id.clone()),
                owner_id: Set(caller.user_id.clone()),
                owner_email: Set(caller.email.clone()),
                agent_name: Set(f.name.clone()),
                agent_type: Set(agent_type.to_owned()),
                agent_args: Set(JsonText(agent_args.clone())),
                description: Set(f.description.clone()),
                mcp_servers: Set(JsonText(f.servers.clone())),
                command: Set(JsonText(f.command.clone())),
                folder: Set(f.zip.clone()),
                folder_sha256: Set(sha),
                created_at: Set(now),
                updated_at: Set(now),
            })
            .exec_without_returning(db)
            .await
            .map_err(db_error)?;
            id
        }
    };
    let tools = tools::of_owner(db, &caller.user_id).await?;
    let assoc = tool_associations(db, &caller.user_id, Some(&id)).await?;
    for s in &f.servers {
        let tool = tools.iter().find(|t| t.tool_name == s.name);
        match assoc.iter().find(|a| a.mcp_server_name == s.name) {
            Some(a) if a.tool_id.is_none() && tool.is_some() => {
                set_tool(db, &caller.user_id, &a.id, tool.map(|t| t.id.as_str())).await?;
            }
            Some(_) => {}
            None => {
                add_tool_association(
                    db,
                    &caller.user_id,
                    &id,
                    &s.name,
                    tool.map(|t| t.id.as_str()),
                )
                .await?;
            }
        }
    }
    let keys = key_associations(db, &caller.user_id, Some(&id)).await?;
    for e in &f.envs {
        match keys.iter().find(|k| k.env_key_name == e.name) {
            Some(k) => {
                custom_agent_key_associations::Entity::update_owned(&caller.user_id, &k.id)
                    .set(custom_agent_key_associations::ActiveModel {
                        requirement_type: Set(e.requirement.to_owned()),
                        default_value: Set(e.default.clone()),
                        ..Default::default()
                    })
                    .exec(db)
                    .await
                    .map_err(db_error)?;
            }
            None => {
                add_key_association(
                    db,
                    &caller.user_id,
                    &id,
                    &e.name,
                    None,
                    e.requirement,
                    e.default.clone(),
                )
                .await?;
            }
        }
    }
    Ok(id)
}

/// Updates agent_args and, per mcp_servers_mapping entry, the server's associated tool (by
/// tool name; null clears).
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    agent_args: &serde_json::Value,
    mapping: &serde_json::Map<String, serde_json::Value>,
) -> ApiResult<()> {
    agent(db, &caller.user_id, id).await?;
    custom_agents::Entity::update_owned(&caller.user_id, id)
        .set(custom_agents::ActiveModel {
            agent_args: Set(JsonText(agent_args.clone())),
            updated_at: Set(Utc::now()),
            ..Default::default()
        })
        .exec(db)
        .await
        .map_err(db_error)?;
    if mapping.is_empty() {
        return Ok(());
    }
    let tools = tools::of_owner(db, &caller.user_id).await?;
    let assoc = tool_associations(db, &caller.user_id, Some(id)).await?;
    for (server, tool_name) in mapping {
        let tool_id = match tool_name {
            serde_json::Value::Null => None,
            serde_json::Value::String(name) => Some(resolve_tool(&tools, name)?.id.clone()),
            other => {
                return Err(ApiError::bad_request(format!(
                    "mcp_servers_mapping values must be tool names or null, not {other}"
                )));
            }
        };
        match assoc.iter().find(|a| &a.mcp_server_name == server) {
            Some(a) => set_tool(db, &caller.user_id, &a.id, tool_id.as_deref()).await?,
            None => {
                add_tool_association(db, &caller.user_id, id, server, tool_id.as_deref()).await?;
            }
        }
    }
    Ok(())
}

/// The caller's tool named `name`; NOT_FOUND otherwise.
pub fn resolve_tool<'a>(tools: &'a [ToolRow], name: &str) -> ApiResult<&'a ToolRow> {
    tools
        .iter()
        .find(|t| t.tool_name == name)
        .ok_or_else(|| ApiError::not_found(format!("custom tool {name} not found")))
}

/// Deletes the caller's agents among `ids` with their associations; how many went.
pub async fn delete(db: &DatabaseConnection, caller: &Caller, ids: &[String]) -> ApiResult<u64> {
    let owner = caller.user_id.as_str();
    let mut count = 0;
    for id in ids {
        let n = custom_agents::Entity::delete_owned(owner, id)
            .exec(db)
            .await
            .map_err(db_error)?
            .rows_affected;
        if n > 0 {
            count += n;
            custom_agent_tool_associations::Entity::delete_by_owner(owner)
                .filter(custom_agent_tool_associations::Column::AgentId.eq(id.as_str()))
                .exec(db)
                .await
                .map_err(db_error)?;
            custom_agent_key_associations::Entity::delete_by_owner(owner)
                .filter(custom_agent_key_associations::Column::AgentId.eq(id.as_str()))
                .exec(db)
                .await
                .map_err(db_error)?;
        }
    }
    Ok(count)
}

// ---- tool associations -------------------------------------------------------------------

/// A tool association's row.
#[derive(Debug, Clone)]
pub struct ToolAssoc {
    pub id: String,
    pub agent_id: String,
    pub mcp_server_name: String,
    pub tool_id: Option<String>,
}

pub async fn tool_associations(
    db: &DatabaseConnection,
    owner_id: &str,
    agent_id: Option<&str>,
) -> ApiResult<Vec<ToolAssoc>> {
    use custom_agent_tool_associations::Column as C;
    let rows = custom_agent_tool_associations::Entity::find_by_owner(owner_id)
        .apply_if(agent_id, |q, a| q.filter(C::AgentId.eq(a)))
        .order_by_asc(C::CreatedAt)
        .order_by_asc(C::Id)
        .all(db)
        .await
        .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|r| ToolAssoc {
            id: r.id,
            agent_id: r.agent_id,
            mcp_server_name: r.mcp_server_name,
            tool_id: r.tool_id,
        })
        .collect())
}

pub async fn add_tool_association(
    db: &DatabaseConnection,
    owner_id: &str,
    agent_id: &str,
    server: &str,
    tool_id: Option<&str>,
) -> ApiResult<String> {
    let id = docchat_common::ids::new_id();
    custom_agent_tool_associations::Entity::insert(custom_agent_tool_associations::ActiveModel {
        id: Set(id.clone()),
        agent_id: Set(agent_id.to_owned()),
        owner_id: Set(owner_id.to_owned()),
        mcp_server_name: Set(server.to_owned()),
        tool_id: Set(tool_id.map(str::to_owned)),
        created_at: Set(Utc::now()),
    })
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    Ok(id)
}

async fn set_tool(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    tool_id: Option<&str>,
) -> ApiResult<()> {
    custom_agent_tool_associations::Entity::update_owned(owner_id, id)
        .set(custom_agent_tool_associations::ActiveModel {
            tool_id: Set(tool_id.map(str::to_owned)),
            ..Default::default()
        })
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The associations of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Associations {
    /// MCP server → custom tool.
    Tool,
    /// Declared environment key → stored key.
    Key,
}

/// Deletes the associations of `kind` among `ids` owned by `owner_id`; how many went.
pub async fn delete_associations(
    db: &DatabaseConnection,
    kind: Associations,
    owner_id: &str,
    ids: &[String],
) -> ApiResult<u64> {
    let mut count = 0;
    for id in ids {
        let done = match kind {
            Associations::Tool => {
                custom_agent_tool_associations::Entity::delete_owned(owner_id, id)
                    .exec(db)
                    .await
            }
            Associations::Key => {
                custom_agent_key_associations::Entity::delete_owned(owner_id, id)
                    .exec(db)
                    .await
            }
        };
        count += done.map_err(db_error)?.rows_affected;
    }
    Ok(count)
}

// ---- key associations --------------------------------------------------------------------

/// A key association's row.
#[derive(Debug, Clone)]
pub struct KeyAssoc {
    pub id: String,
    pub agent_id: String,
    pub env_key_name: String,
    pub key_id: Option<String>,
    pub requirement_type: String,
    pub default_value: Option<String>,
}

pub async fn key_associations(
    db: &DatabaseConnection,
    owner_id: &str,
    agent_id: Option<&str>,
) -> ApiResult<Vec<KeyAssoc>> {
    use custom_agent_key_associations::Column as C;
    let rows = custom_agent_key_associations::Entity::find_by_owner(owner_id)
        .apply_if(agent_id, |q, a| q.filter(C::AgentId.eq(a)))
        .order_by_asc(C::CreatedAt)
        .order_by_asc(C::Id)
        .all(db)
        .await
        .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|r| KeyAssoc {
            id: r.id,
            agent_id: r.agent_id,
            env_key_name: r.env_key_name,
            key_id: r.key_id,
            requirement_type: r.requirement_type,
            default_value: r.default_value,
        })
        .collect())
}

pub async fn add_key_association(
    db: &DatabaseConnection,
    owner_id: &str,
    agent_id: &str,
    env_key_name: &str,
    key_id: Option<&str>,
    requirement: &str,
    default: Option<String>,
) -> ApiResult<String> {
    let id = docchat_common::ids::new_id();
    custom_agent_key_associations::Entity::insert(custom_agent_key_associations::ActiveModel {
        id: Set(id.clone()),
        agent_id: Set(agent_id.to_owned()),
        owner_id: Set(owner_id.to_owned()),
        env_key_name: Set(env_key_name.to_owned()),
        key_id: Set(key_id.map(str::to_owned)),
        requirement_type: Set(requirement.to_owned()),
        default_value: Set(default),
        created_at: Set(Utc::now()),
    })
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    Ok(id)
}

/// Gives the declared key `id` the stored key `key_id`.
pub async fn give_key(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    key_id: &str,
) -> ApiResult<()> {
    custom_agent_key_associations::Entity::update_owned(owner_id, id)
        .set(custom_agent_key_associations::ActiveModel {
            key_id: Set(Some(key_id.to_owned())),
            ..Default::default()
        })
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The wire form of a tool association.
pub fn tool_assoc_pb(
    a: &ToolAssoc,
    agent_name: &str,
    owner_id: &str,
    tools: &[ToolRow],
) -> pb::ToolAssociation {
    let tool = a
        .tool_id
        .as_deref()
        .and_then(|t| tools.iter().find(|r| r.id == t));
    pb::ToolAssociation {
        id: a.id.clone(),
        agent_id: a.agent_id.clone(),
        agent_name: agent_name.to_owned(),
        tool_id: tool.map(|t| t.id.clone()),
        tool_name: tool.map(|t| t.tool_name.clone()),
        mcp_server_name: a.mcp_server_name.clone(),
        user_id: owner_id.to_owned(),
    }
}
