//! One live MCP connection (our face of rmcp's client): started or connected from a
//! [`Server`], bounded in time, listing and calling tools. Dropping it ends the rmcp
//! session and, for a stdio server, the sandboxed process (group) behind it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::config::Server;
use super::{http, sse};
use docchat_sandbox::{CodeRunner, CodeSpec};

/// What connecting needs besides the server.
pub struct Connect {
    /// The sandbox (stdio servers).
    pub code: Arc<dyn CodeRunner>,
    /// Read-write for a stdio server (the session's workspace, or a scratch directory).
    pub workspace: PathBuf,
    /// Hosts the egress rule lets through although private.
    pub allow: Vec<String>,
    /// Bound on starting and on the MCP handshake.
    pub wait: Duration,
    /// A stdio server's lifetime (its wall clock).
    pub lifetime: Duration,
    pub memory: Option<u64>,
    /// Whose server it is (its share of the sandbox's slots).
    pub user: String,
    /// Its user's other workspaces and their disk total (a stdio server's workspace is
    /// watched against it).
    pub disk: docchat_sandbox::UserDisk,
}

/// A tool the server lists.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

pub struct Session {
    service: RunningService<RoleClient, ()>,
    /// The server, for blanking its stored keys out of error texts.
    server: Server,
    /// Ends the sandboxed server when the session goes.
    _server: Option<DropGuard>,
}

impl Session {
    /// Connects; an error never quotes a stored key's value.
    pub async fn connect(server: &Server, how: &Connect) -> Result<Session, String> {
        Session::open(server, how)
            .await
            .map_err(|e| server.redact(e))
    }

    async fn open(server: &Server, how: &Connect) -> Result<Session, String> {
        let bounded = |what: &'static str| {
            move |_| format!("the MCP server did not {what} within {:?}", how.wait)
        };
        match server {
            Server::Stdio(s) => {
                let at = how.code.documents_at(&s.package);
                let spec = CodeSpec {
                    argv: s.argv_at(&at),
                    workspace: how.workspace.clone(),
                    stdin: None,
                    wall_clock: how.lifetime,
                    memory_bytes: how.memory,
                    documents: Some(s.package.clone()),
                    user: how.user.clone(),
                    disk: how.disk.clone(),
                };
                let stop = CancellationToken::new();
                let (tx, rx) = tokio::sync::oneshot::channel();
                let code = how.code.clone();
                let token = stop.clone();
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the server lives as long as its Session, which cancels it on drop; serve kills and sweeps before it returns"
                )]
                tokio::spawn(async move { code.serve(spec, tx, token).await });
                let guard = stop.drop_guard();
                let pipes = tokio::time::timeout(how.wait, rx)
                    .await
                    .map_err(bounded("start"))?
                    .map_err(|_| "the MCP server did not start".to_owned())??;
                let stderr = pipes.stderr.clone();
                let service = tokio::time::timeout(how.wait, ().serve((pipes.stdout, pipes.stdin)))
                    .await
                    .map_err(bounded("answer"))?
                    .map_err(|e| {
                        let tail = stderr.lock().map(|t| t.clone()).unwrap_or_default();
                        let tail = tail.trim();
                        if tail.is_empty() {
                            format!("the MCP server failed to start: {e}")
                        } else {
                            format!(
                                "the MCP server failed to start: {e}; it said: {}",
                                crate::tools::clip(tail, 2000)
                            )
                        }
                    })?;
                Ok(Session {
                    service,
                    server: server.clone(),
                    _server: Some(guard),
                })
            }
            Server::Http(r) => {
                let client = http::pinned(&r.url, &how.allow).await?;
                let mut headers = std::collections::HashMap::new();
                for (k, v) in &r.headers {
                    let name = http::header_name(k)?;
                    let value = ::http::HeaderValue::from_str(v)
                        .map_err(|_| format!("header {k} has a value that cannot be sent"))?;
                    headers.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(r.url.as_str())
                    .custom_headers(headers);
                let transport =
                    StreamableHttpClientTransport::with_client(http::Http(client), config);
                let service = tokio::time::timeout(how.wait, ().serve(transport))
                    .await
                    .map_err(bounded("answer"))?
                    .map_err(|e| format!("cannot connect to the MCP server: {e}"))?;
                Ok(Session {
                    service,
                    server: server.clone(),
                    _server: None,
                })
            }
            Server::Sse(r) => {
                let client = http::pinned(&r.url, &how.allow).await?;
                let transport = tokio::time::timeout(
                    how.wait,
                    sse::Legacy::connect(client, &r.url, r.headers.clone(), how.wait),
                )
                .await
                .map_err(bounded("answer"))??;
                let service = tokio::time::timeout(how.wait, ().serve(transport))
                    .await
                    .map_err(bounded("answer"))?
                    .map_err(|e| format!("cannot connect to the MCP server: {e}"))?;
                Ok(Session {
                    service,
                    server: server.clone(),
                    _server: None,
                })
            }
        }
    }

    /// Every tool the server lists (bounded by `wait`).
    pub async fn tools(&self, wait: Duration) -> Result<Vec<Listed>, String> {
        self.list(wait).await.map_err(|e| self.server.redact(e))
    }

    async fn list(&self, wait: Duration) -> Result<Vec<Listed>, String> {
        let tools = tokio::time::timeout(wait, self.service.list_all_tools())
            .await
            .map_err(|_| format!("the MCP server did not list its tools within {wait:?}"))?
            .map_err(|e| format!("the MCP server did not list its tools: {e}"))?;
        Ok(tools
            .into_iter()
            .map(|t| Listed {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                parameters: Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    /// Calls `name`: its text content joined; an error result is an Err with its text.
    pub async fn call(&self, name: &str, args: Value) -> Result<String, String> {
        self.call_once(name, args)
            .await
            .map(|t| self.server.redact(t))
            .map_err(|e| self.server.redact(e))
    }

    async fn call_once(&self, name: &str, args: Value) -> Result<String, String> {
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            _ => return Err("the arguments must be a JSON object".into()),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let result = self
            .service
            .call_tool(params)
            .await
            .map_err(|e| format!("the MCP call failed: {e}"))?;
        let mut parts: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        if parts.is_empty()
            && let Some(structured) = &result.structured_content
        {
            parts.push(structured.to_string());
        }
        let text = parts.join("\n");
        if result.is_error == Some(true) {
            Err(if text.is_empty() {
                "the MCP tool reported an error".into()
            } else {
                text
            })
        } else {
            Ok(text)
        }
    }
}
