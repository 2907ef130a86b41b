//! MCP inspection (POST /agents/mcp/inspect_tool): each server is started or connected to,
//! bounded by [`Settings::wait`], and its tools listed; with a `model`, that model reviews
//! the tools' descriptions (prompt injection, over-broad capabilities) and its JSON verdict
//! is the server's `security`. Every semantic failure is `status: error` in the answer.
//! Packages (a ZIP, checked by [`crate::archive`]) are unpacked into scratch space and run
//! in the sandbox like a run's local servers.

use std::path::Path;
use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::error::ApiError;
use docchat_proto::agent::v1 as pb;
use serde_json::{Map, Value};

use super::config::{self, Server};
use super::session::{Connect, Listed, Session};
use super::{Scratch, Settings, server_of};
use crate::tools::custom::{InspectTarget, Inspector, Secrets};
use docchat_sandbox::CodeRunner;

/// An inspected package's caps: about 100 MB uploads.
const PACKAGE: crate::archive::Limits = crate::archive::Limits {
    max_entries: 50_000,
    max_entry: 200 << 20,
    max_total: 500 << 20,
    max_ratio: 200,
};

/// Reviews a server's tools with a chat model.
#[async_trait::async_trait]
pub trait Reviewer: Send + Sync {
    /// The model's verdict (a JSON object), or why there is none.
    async fn review(&self, model: &str, server: &str, tools: &[Listed]) -> Result<Value, String>;
}

pub struct McpInspector {
    pub code: Arc<dyn CodeRunner>,
    pub settings: Settings,
    pub reviewer: Option<Arc<dyn Reviewer>>,
}

struct Target {
    name: String,
    server: Result<Server, String>,
    detection: String,
    /// A stored package unpacked for the inspection.
    _kept: Option<Scratch>,
}

impl McpInspector {
    async fn targets(
        &self,
        caller: &Caller,
        target: InspectTarget<'_>,
        secrets: &dyn Secrets,
        scratch: &Scratch,
    ) -> Result<Vec<Target>, String> {
        match target {
            InspectTarget::Tool(record, files) => {
                let (server, kept) = match server_of(record, files, &scratch.0, secrets).await {
                    Ok((s, kept)) => (Ok(s), kept),
                    Err(e) => (Err(e), None),
                };
                let detection = detection(&server, "stored_tool");
                Ok(vec![Target {
                    name: record.tool_name.clone(),
                    server,
                    detection,
                    _kept: kept,
                }])
            }
            InspectTarget::Servers(map) => Ok(self.configured(caller, map, secrets, scratch).await),
            InspectTarget::File { name, data } => {
                let lower = name.to_ascii_lowercase();
                if lower.ends_with(".json") {
                    let json: Value = serde_json::from_slice(data)
                        .map_err(|e| format!("{name} is not JSON: {e}"))?;
                    let servers = json
                        .get("mcpServers")
                        .and_then(Value::as_object)
                        .cloned()
                        .ok_or_else(|| format!("{name} has no mcpServers object"))?;
                    Ok(self.configured(caller, servers, secrets, scratch).await)
                } else if lower.ends_with(".zip") {
                    let package = scratch.0.join("package");
                    crate::archive::extract(data, &package, &PACKAGE).map_err(|e| e.0)?;
                    let server = config::local(&package).map(Server::Stdio);
                    let detection = detection(&server, "package");
                    let stem = Path::new(name)
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "mcp".into());
                    Ok(vec![Target {
                        name: stem,
                        server,
                        detection,
                        _kept: None,
                    }])
                } else {
                    Err(format!(
                        "{name}: an MCP package must be a .zip or a .json configuration"
                    ))
                }
            }
        }
    }

    /// `servers`: name → configuration (`url` for remote servers; `command`/`args` for a
    /// stdio server, run in the sandbox without a package).
    async fn configured(
        &self,
        caller: &Caller,
        servers: Map<String, Value>,
        secrets: &dyn Secrets,
        scratch: &Scratch,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for (name, cfg) in servers {
            let server = match cfg.as_object() {
                None => Err("the server configuration must be an object".to_owned()),
                Some(c) if c.contains_key("command") => {
                    let package = scratch.0.join("empty");
                    let _ = std::fs::create_dir_all(&package);
                    Ok(Server::Stdio(config::Stdio {
                        package,
                        command: c
                            .get("command")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        args: c
                            .get("args")
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .filter_map(|v| v.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        detection: "config_command",
                    }))
                }
                Some(c) => config::remote(c, &caller.user_id, secrets).await,
            };
            let detection = detection(&server, "config");
            out.push(Target {
                name,
                server,
                detection,
                _kept: None,
            });
        }
        out
    }

    async fn one(
        &self,
        caller: &Caller,
        target: Target,
        model: &str,
        workspace: &Path,
    ) -> pb::InspectedServer {
        let kind = target
            .server
            .as_ref()
            .map(Server::kind)
            .unwrap_or("stdio")
            .to_owned();
        let mut out = pb::InspectedServer {
            server_name: target.name.clone(),
            server_type: kind,
            tools: Vec::new(),
            status: "error".into(),
            security_json: "{}".into(),
            error: String::new(),
            detection_method: target.detection,
        };
        let server = match target.server {
            Ok(s) => s,
            Err(e) => {
                out.error = e;
                return out;
            }
        };
        let how = Connect {
            code: self.code.clone(),
            workspace: workspace.to_path_buf(),
            allow: self.settings.allow.clone(),
            wait: self.settings.wait,
            lifetime: self.settings.wait * 2,
            memory: None,
            user: caller.user_id.clone(),
            // A scratch directory of the inspection's own, gone after it.
            disk: docchat_sandbox::UserDisk::default(),
        };
        let listed = async {
            let session = Session::connect(&server, &how).await?;
            session.tools(self.settings.wait).await
        };
        let listed = match tokio::time::timeout(self.settings.wait * 2, listed).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                out.error = e;
                return out;
            }
            Err(_) => {
                out.error = format!(
                    "the MCP server did not answer within {:?}",
                    self.settings.wait * 2
                );
                return out;
            }
        };
        if !model.is_empty()
            && let Some(reviewer) = &self.reviewer
        {
            out.security_json = match reviewer.review(model, &target.name, &listed).await {
                Ok(v) => v.to_string(),
                Err(e) => serde_json::json!({"status": "error", "error": e}).to_string(),
            };
        }
        out.tools = listed
            .into_iter()
            .map(|t| pb::InspectedTool {
                name: t.name,
                description: t.description,
                parameters_json: t.parameters.to_string(),
            })
            .collect();
        out.status = "success".into();
        out
    }
}

fn detection(server: &Result<Server, String>, how: &str) -> String {
    match server {
        Ok(Server::Stdio(s)) => s.detection.to_owned(),
        Ok(Server::Http(_)) => format!("{how}:streamable_http"),
        Ok(Server::Sse(_)) => format!("{how}:sse"),
        Err(_) => how.to_owned(),
    }
}

#[async_trait::async_trait]
impl Inspector for McpInspector {
    async fn inspect(
        &self,
        caller: &Caller,
        target: InspectTarget<'_>,
        model: &str,
        secrets: &dyn Secrets,
    ) -> Result<pb::InspectResult, ApiError> {
        let failed = |error: String| pb::InspectResult {
            status: "error".into(),
            servers: Vec::new(),
            error,
        };
        let scratch = match Scratch::new(&self.settings.scratch) {
            Ok(s) => s,
            Err(e) => return Err(ApiError::internal("mcp inspect scratch", e)),
        };
        let targets = match self.targets(caller, target, secrets, &scratch).await {
            Ok(t) if t.is_empty() => return Ok(failed("no MCP server to inspect".into())),
            Ok(t) => t,
            Err(e) => return Ok(failed(e)),
        };
        let workspace = scratch.0.join("workspace");
        std::fs::create_dir_all(&workspace)
            .map_err(|e| ApiError::internal("mcp inspect workspace", e))?;
        let mut servers = Vec::new();
        for t in targets {
            servers.push(self.one(caller, t, model, &workspace).await);
        }
        let errors: Vec<String> = servers
            .iter()
            .filter(|s| s.status != "success")
            .map(|s| format!("{}: {}", s.server_name, s.error))
            .collect();
        Ok(pb::InspectResult {
            status: if errors.is_empty() {
                "success"
            } else {
                "error"
            }
            .into(),
            error: errors.join("; "),
            servers,
        })
    }
}
