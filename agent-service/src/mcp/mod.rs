//! MCP servers as agent tools (local_mcp, remote_mcp) and their inspection, over the
//! official Rust SDK `rmcp` kept behind this module (it moves fast): [`config`] says what a
//! server is, [`session`] connects to it (a stdio server in the sandbox, streamable HTTP
//! through [`http`], legacy SSE through [`sse`], both under the egress rule), [`McpOpener`]
//! offers its tools to a run and [`inspect::McpInspector`] answers inspect_tool.
//!
//! A local server sees its package read-only (where the sandbox shows documents) and the
//! session's workspace read-write (at /workspace under bubblewrap), like the code tools:
//! its tools may write files the user gets back, so they count as writing.

pub mod config;
pub mod http;
pub mod inspect;
pub mod review;
pub mod session;
pub mod sse;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::tools::custom::{Opener, Secrets, ToolRecord, ToolType};
use crate::tools::{Opened, Tool, ToolCtx, ToolOutput};
use config::Server;
use session::{Connect, Listed, Session};

/// Deployment settings of MCP.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Hosts remote servers may be reached on although they resolve to loopback, private
    /// or link-local addresses (`DOCCHAT_AGENT_EGRESS_ALLOW`, comma-separated, plus the
    /// tests' own).
    pub allow: Vec<String>,
    /// Bound on starting a server and on each handshake or listing.
    pub wait: Duration,
    /// How long a local server may live (a run's longest).
    pub lifetime: Duration,
    /// Where ZIP packages are unpacked and inspections get their scratch space.
    pub scratch: PathBuf,
}

impl Settings {
    pub fn new(scratch: PathBuf, allow: Vec<String>) -> Settings {
        Settings {
            allow,
            wait: Duration::from_secs(30),
            lifetime: Duration::from_secs(3600),
            scratch,
        }
    }
}

/// Opens local_mcp and remote_mcp tools for a run.
pub struct McpOpener {
    pub settings: Settings,
}

/// The openers of this module, by tool type (for lib.rs's registration).
pub fn openers(settings: Settings) -> Openers {
    let opener: Arc<dyn Opener> = Arc::new(McpOpener { settings });
    vec![
        (ToolType::LocalMcp, opener.clone()),
        (ToolType::RemoteMcp, opener),
    ]
}

/// The openers of a module, by the tool type each opens.
pub type Openers = Vec<(ToolType, Arc<dyn Opener>)>;

/// What lib.rs registers (the custom-tools registry takes them): the openers of local_mcp
/// and remote_mcp, and the inspector, with `registry`'s models reviewing.
pub fn for_service(
    code: Arc<dyn docchat_sandbox::CodeRunner>,
    settings: Settings,
    registry: docchat_inference::Registry,
) -> (Openers, Arc<dyn crate::tools::custom::Inspector>) {
    let inspector = inspect::McpInspector {
        code,
        settings: settings.clone(),
        reviewer: Some(Arc::new(review::ModelReviewer { registry })),
    };
    (openers(settings), Arc::new(inspector))
}

/// The server a stored record describes (`files`: its package, for local_mcp).
pub async fn server_of(
    record: &ToolRecord,
    files: Option<&Path>,
    scratch: &Path,
    secrets: &dyn Secrets,
) -> Result<(Server, Option<Scratch>), String> {
    match record.tool_type {
        ToolType::LocalMcp => {
            let files = files.ok_or("the tool has no package")?;
            match config::local(files) {
                Ok(s) => Ok((Server::Stdio(s), None)),
                // Stored as uploaded: unpack the ZIP first.
                Err(why) => {
                    let Some(zip) = single_zip(files) else {
                        return Err(why);
                    };
                    let data = std::fs::read(&zip).map_err(|e| format!("the package: {e}"))?;
                    let dir = Scratch::new(scratch)?;
                    let package = dir.0.join("package");
                    crate::archive::extract(&data, &package, &crate::archive::Limits::UPLOAD)
                        .map_err(|e| e.0)?;
                    Ok((Server::Stdio(config::local(&package)?), Some(dir)))
                }
            }
        }
        ToolType::RemoteMcp => {
            let config = remote_config(record)?;
            Ok((
                config::remote(&config, &record.owner_id, secrets).await?,
                None,
            ))
        }
        other => Err(format!("{} is not an MCP tool", other.as_str())),
    }
}

/// This server's configuration from `mcp_config_json` (an object or its JSON text, with
/// `mcpServers`: the entry named like the tool, else the only one).
fn remote_config(record: &ToolRecord) -> Result<serde_json::Map<String, Value>, String> {
    let raw = record
        .args
        .get("mcp_config_json")
        .ok_or("the tool has no mcp_config_json")?;
    let parsed;
    let json = match raw {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| format!("mcp_config_json is not JSON: {e}"))?;
            &parsed
        }
        other => other,
    };
    let servers = json
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or("mcp_config_json has no mcpServers object")?;
    servers
        .get(&record.tool_name)
        .or_else(|| servers.values().next())
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| "mcp_config_json names no server".to_owned())
}

fn single_zip(dir: &Path) -> Option<PathBuf> {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    match entries.as_slice() {
        [one]
            if one
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("zip")) =>
        {
            Some(one.clone())
        }
        _ => None,
    }
}

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(root: &Path) -> Result<Scratch, String> {
        let dir = root.join(docchat_common::ids::new_name());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot prepare scratch space: {e}"))?;
        // Searchable by the sandbox's slot uids (the package inside is read by them).
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711));
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[async_trait::async_trait]
impl Opener for McpOpener {
    async fn open(
        &self,
        record: &ToolRecord,
        files: Option<&Path>,
        ctx: &ToolCtx,
        secrets: &dyn Secrets,
    ) -> Result<Opened, String> {
        let (server, scratch) = server_of(record, files, &self.settings.scratch, secrets).await?;
        let mut allow = self.settings.allow.clone();
        allow.extend(ctx.deps.fetch_allow.iter().cloned());
        let how = Connect {
            code: ctx.deps.code.clone(),
            workspace: ctx.workspace.clone(),
            allow,
            wait: self.settings.wait,
            lifetime: self.settings.lifetime,
            memory: ctx.max_memory,
            user: ctx.caller.user_id.clone(),
            disk: ctx.disk.clone(),
        };
        let session = Session::connect(&server, &how)
            .await
            .map_err(|e| format!("MCP server {}: {e}", record.tool_name))?;
        let listed = session
            .tools(self.settings.wait)
            .await
            .map_err(|e| format!("MCP server {}: {e}", record.tool_name))?;
        let shared = Arc::new(Live {
            session,
            _scratch: scratch,
        });
        let writes = matches!(server, Server::Stdio(_));
        let mut names: Vec<String> = Vec::new();
        let tools = listed
            .into_iter()
            .map(|t| {
                let name = unique(tool_name(&record.tool_name, &t.name), &names);
                names.push(name.clone());
                Arc::new(McpTool {
                    name,
                    listed: t,
                    live: shared.clone(),
                    writes,
                }) as Arc<dyn Tool>
            })
            .collect();
        Ok(Opened {
            tools,
            instructions: Vec::new(),
            notes: Vec::new(),
        })
    }
}

/// A session and what must live as long as it.
struct Live {
    session: Session,
    _scratch: Option<Scratch>,
}

/// One tool of an MCP server in a run.
pub struct McpTool {
    name: String,
    listed: Listed,
    live: Arc<Live>,
    writes: bool,
}

/// `<server>__<tool>` in the model API's alphabet (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("{server}__{tool}");
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        name.push_str("mcp_tool");
    }
    name
}

fn unique(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    (2..)
        .map(|i| {
            let suffix = format!("_{i}");
            let keep = name.len().min(64 - suffix.len());
            format!("{}{suffix}", &name[..keep])
        })
        .find(|n| !taken.contains(n))
        .unwrap_or(name)
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.listed.description
    }

    fn parameters(&self) -> Value {
        self.listed.parameters.clone()
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        tokio::select! {
            r = tokio::time::timeout(ctx.timeout, self.live.session.call(&self.listed.name, args)) => match r {
                Ok(r) => r.map(|t| ToolOutput::text(crate::tools::clip(&t, 50_000))),
                Err(_) => Err(format!("the MCP tool did not answer within {:?}", ctx.timeout)),
            },
            () = ctx.cancel.cancelled() => Err("cancelled".into()),
        }
    }

    fn writes(&self) -> bool {
        self.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_model_api() {
        assert_eq!(tool_name("my server", "add.v2"), "my_server__add_v2");
        let long = tool_name(&"s".repeat(50), &"t".repeat(50));
        assert_eq!(long.len(), 64);
        assert_eq!(unique("a".into(), &["a".into()]), "a_2");
    }
}
