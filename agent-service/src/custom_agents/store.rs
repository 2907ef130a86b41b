//! Custom agents and their associations in the database. Every read and write is scoped to
//! the caller's user id: another user's agent or association is simply not found.

use chrono::Utc;
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, Value};
use sha2::{Digest, Sha256};

use super::db_error;
use super::tools::{self, ToolRow};
use super::upload::{AgentFolder, Declared};
use crate::preferences::stmt;

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

const AGENT_COLUMNS: &str = "id, owner_id, owner_email, agent_name, agent_type, agent_args, description, mcp_servers, command, folder_sha256";

fn agent_of(r: &QueryResult) -> ApiResult<AgentRow> {
    let text = |c: &str| -> ApiResult<String> { r.try_get("", c).map_err(db_error) };
    Ok(AgentRow {
        id: text("id")?,
        owner_id: text("owner_id")?,
        owner_email: text("owner_email")?,
        agent_name: text("agent_name")?,
        agent_type: text("agent_type")?,
        agent_args: serde_json::from_str(&text("agent_args")?).unwrap_or_default(),
        description: text("description")?,
        servers: serde_json::from_str(&text("mcp_servers")?).unwrap_or_default(),
        command: serde_json::from_str(&text("command")?).unwrap_or_default(),
        folder_sha256: text("folder_sha256")?,
    })
}

fn not_found(what: &str, id: &str) -> ApiError {
    ApiError::not_found(format!("{what} {id} not found"))
}

async fn exec(db: &DatabaseConnection, sql: &str, values: Vec<Value>) -> ApiResult<u64> {
    Ok(db
        .execute(stmt(db, sql, values))
        .await
        .map_err(db_error)?
        .rows_affected())
}

/// The caller's agents (all of them, or the one with `id`, or the one named `name`).
pub async fn agents(
    db: &DatabaseConnection,
    owner_id: &str,
    id: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Vec<AgentRow>> {
    let mut sql = format!("SELECT {AGENT_COLUMNS} FROM custom_agents WHERE owner_id = ?");
    let mut values: Vec<Value> = vec![owner_id.into()];
    if let Some(id) = id {
        sql.push_str(" AND id = ?");
        values.push(id.into());
    }
    if let Some(name) = name {
        sql.push_str(" AND agent_name = ?");
        values.push(name.into());
    }
    sql.push_str(" ORDER BY agent_name, id");
    let rows = db
        .query_all(stmt(db, &sql, values))
        .await
        .map_err(db_error)?;
    rows.iter().map(agent_of).collect()
}

/// The caller's agent `id`; NOT_FOUND otherwise.
pub async fn agent(db: &DatabaseConnection, owner_id: &str, id: &str) -> ApiResult<AgentRow> {
    agents(db, owner_id, Some(id), None)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| not_found("custom agent", id))
}

/// The ZIP of agent `id`'s folder.
pub async fn folder(db: &DatabaseConnection, id: &str) -> ApiResult<Vec<u8>> {
    let row = db
        .query_one(stmt(
            db,
            "SELECT folder FROM custom_agents WHERE id = ?",
            vec![id.into()],
        ))
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found("custom agent", id))?;
    row.try_get("", "folder").map_err(db_error)
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
    let servers = serde_json::to_string(&f.servers).unwrap_or_else(|_| "[]".into());
    let command = serde_json::to_string(&f.command).unwrap_or_else(|_| "[]".into());
    let existing = agents(db, &caller.user_id, None, Some(&f.name)).await?;
    let id = match existing.first() {
        Some(a) => {
            exec(
                db,
                "UPDATE custom_agents SET agent_type = ?, agent_args = ?, description = ?, mcp_servers = ?, command = ?, folder = ?, folder_sha256 = ?, updated_at = ? WHERE id = ? AND owner_id = ?",
                vec![
                    agent_type.into(),
                    agent_args.to_string().into(),
                    f.description.clone().into(),
                    servers.into(),
                    command.into(),
                    f.zip.clone().into(),
                    sha.into(),
                    now.into(),
                    a.id.clone().into(),
                    caller.user_id.clone().into(),
                ],
            )
            .await?;
            a.id.clone()
        }
        None => {
            let id = docchat_common::ids::new_id();
            exec(
                db,
                "INSERT INTO custom_agents (id, owner_id, owner_email, agent_name, agent_type, agent_args, description, mcp_servers, command, folder, folder_sha256, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    id.clone().into(),
                    caller.user_id.clone().into(),
                    caller.email.clone().into(),
                    f.name.clone().into(),
                    agent_type.into(),
                    agent_args.to_string().into(),
                    f.description.clone().into(),
                    servers.into(),
                    command.into(),
                    f.zip.clone().into(),
                    sha.into(),
                    now.into(),
                    now.into(),
                ],
            )
            .await?;
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
                exec(
                    db,
                    "UPDATE custom_agent_key_associations SET requirement_type = ?, default_value = ? WHERE id = ? AND owner_id = ?",
                    vec![
                        e.requirement.into(),
                        e.default.clone().into(),
                        k.id.clone().into(),
                        caller.user_id.clone().into(),
                    ],
                )
                .await?;
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
    exec(
        db,
        "UPDATE custom_agents SET agent_args = ?, updated_at = ? WHERE id = ? AND owner_id = ?",
        vec![
            agent_args.to_string().into(),
            Utc::now().into(),
            id.into(),
            caller.user_id.clone().into(),
        ],
    )
    .await?;
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
    let mut count = 0;
    for id in ids {
        let n = exec(
            db,
            "DELETE FROM custom_agents WHERE id = ? AND owner_id = ?",
            vec![id.clone().into(), caller.user_id.clone().into()],
        )
        .await?;
        if n > 0 {
            count += n;
            for table in [
                "custom_agent_tool_associations",
                "custom_agent_key_associations",
            ] {
                exec(
                    db,
                    &format!("DELETE FROM {table} WHERE agent_id = ? AND owner_id = ?"),
                    vec![id.clone().into(), caller.user_id.clone().into()],
                )
                .await?;
            }
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
    let mut sql = "SELECT id, agent_id, mcp_server_name, tool_id FROM custom_agent_tool_associations WHERE owner_id = ?".to_owned();
    let mut values: Vec<Value> = vec![owner_id.into()];
    if let Some(a) = agent_id {
        sql.push_str(" AND agent_id = ?");
        values.push(a.into());
    }
    sql.push_str(" ORDER BY created_at, id");
    let rows = db
        .query_all(stmt(db, &sql, values))
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            Ok(ToolAssoc {
                id: r.try_get("", "id").map_err(db_error)?,
                agent_id: r.try_get("", "agent_id").map_err(db_error)?,
                mcp_server_name: r.try_get("", "mcp_server_name").map_err(db_error)?,
                tool_id: r.try_get("", "tool_id").map_err(db_error)?,
            })
        })
        .collect()
}

pub async fn add_tool_association(
    db: &DatabaseConnection,
    owner_id: &str,
    agent_id: &str,
    server: &str,
    tool_id: Option<&str>,
) -> ApiResult<String> {
    let id = docchat_common::ids::new_id();
    exec(
        db,
        "INSERT INTO custom_agent_tool_associations (id, agent_id, owner_id, mcp_server_name, tool_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        vec![
            id.clone().into(),
            agent_id.into(),
            owner_id.into(),
            server.into(),
            tool_id.map(str::to_owned).into(),
            Utc::now().into(),
        ],
    )
    .await?;
    Ok(id)
}

async fn set_tool(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    tool_id: Option<&str>,
) -> ApiResult<()> {
    exec(
        db,
        "UPDATE custom_agent_tool_associations SET tool_id = ? WHERE id = ? AND owner_id = ?",
        vec![
            tool_id.map(str::to_owned).into(),
            id.into(),
            owner_id.into(),
        ],
    )
    .await?;
    Ok(())
}

/// Deletes rows of `table` among `ids` owned by `owner_id`; how many went.
pub async fn delete_owned(
    db: &DatabaseConnection,
    table: &str,
    owner_id: &str,
    ids: &[String],
) -> ApiResult<u64> {
    let mut count = 0;
    for id in ids {
        count += exec(
            db,
            &format!("DELETE FROM {table} WHERE id = ? AND owner_id = ?"),
            vec![id.clone().into(), owner_id.into()],
        )
        .await?;
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
    let mut sql = "SELECT id, agent_id, env_key_name, key_id, requirement_type, default_value FROM custom_agent_key_associations WHERE owner_id = ?".to_owned();
    let mut values: Vec<Value> = vec![owner_id.into()];
    if let Some(a) = agent_id {
        sql.push_str(" AND agent_id = ?");
        values.push(a.into());
    }
    sql.push_str(" ORDER BY created_at, id");
    let rows = db
        .query_all(stmt(db, &sql, values))
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            Ok(KeyAssoc {
                id: r.try_get("", "id").map_err(db_error)?,
                agent_id: r.try_get("", "agent_id").map_err(db_error)?,
                env_key_name: r.try_get("", "env_key_name").map_err(db_error)?,
                key_id: r.try_get("", "key_id").map_err(db_error)?,
                requirement_type: r.try_get("", "requirement_type").map_err(db_error)?,
                default_value: r.try_get("", "default_value").map_err(db_error)?,
            })
        })
        .collect()
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
    exec(
        db,
        "INSERT INTO custom_agent_key_associations (id, agent_id, owner_id, env_key_name, key_id, requirement_type, default_value, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            id.clone().into(),
            agent_id.into(),
            owner_id.into(),
            env_key_name.into(),
            key_id.map(str::to_owned).into(),
            requirement.into(),
            default.into(),
            Utc::now().into(),
        ],
    )
    .await?;
    Ok(id)
}

/// Gives the declared key `id` the stored key `key_id`.
pub async fn give_key(
    db: &DatabaseConnection,
    owner_id: &str,
    id: &str,
    key_id: &str,
) -> ApiResult<()> {
    exec(
        db,
        "UPDATE custom_agent_key_associations SET key_id = ? WHERE id = ? AND owner_id = ?",
        vec![key_id.into(), id.into(), owner_id.into()],
    )
    .await?;
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
