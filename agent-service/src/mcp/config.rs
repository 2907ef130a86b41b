//! What an MCP server is, from its configuration: a stdio server of a local_mcp package
//! (run in the sandbox) or a remote one over streamable HTTP or legacy SSE. Remote headers
//! and `${NAME}` references are resolved here, server-side, from the owner's stored keys
//! ([`Secrets`]); resolved values live only in the returned [`Server`] and never reach an
//! answer or a log line.
//!
//! How a local_mcp package declares its server (docs/mcp.md):
//! 1. `mcp.json` at the package's top (or in its only folder) with an `mcpServers` object
//!    (the first entry is used): `command` and `args`; a command or argument naming a file
//!    of the package is given as the path where the sandbox sees it;
//! 2. otherwise a single `server.py` (or `main.py`) there, run with `python3`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::tools::custom::Secrets;

/// One server, ready to connect to.
#[derive(Clone)]
pub enum Server {
    /// A stdio server of a package: `argv` with package paths as `package/...` relative
    /// paths (see [`Stdio::argv_at`]).
    Stdio(Stdio),
    Http(Remote),
    Sse(Remote),
}

#[derive(Debug, Clone)]
pub struct Stdio {
    /// The package's directory on this host (read-only for the server).
    pub package: PathBuf,
    pub command: String,
    pub args: Vec<String>,
    /// How it was found (inspect's detection_method).
    pub detection: &'static str,
}

impl Stdio {
    /// The command line as the server sees it when the package is mounted at `at`:
    /// entries naming a file of the package become paths under `at`.
    pub fn argv_at(&self, at: &Path) -> Vec<String> {
        std::iter::once(&self.command)
            .chain(&self.args)
            .map(|a| {
                let rel = a.trim_start_matches("./");
                if !a.starts_with('/')
                    && !rel.is_empty()
                    && !rel.split('/').any(|c| c == "..")
                    && self.package.join(rel).exists()
                {
                    at.join(rel).display().to_string()
                } else {
                    a.clone()
                }
            })
            .collect()
    }
}

#[derive(Clone)]
pub struct Remote {
    pub url: String,
    /// Resolved header values (secrets among them).
    pub headers: Vec<(String, String)>,
    /// The stored keys' values used, blanked out of every error text ([`Server::redact`]).
    pub secrets: Vec<String>,
}

impl Server {
    /// `text` without the stored keys' values this server's configuration used (an error
    /// of the HTTP client may quote the URL).
    pub fn redact(&self, text: String) -> String {
        match self {
            Server::Http(r) | Server::Sse(r) => r
                .secrets
                .iter()
                .filter(|s| !s.is_empty())
                .fold(text, |t, s| t.replace(s.as_str(), "***")),
            Server::Stdio(_) => text,
        }
    }

    /// inspect's server_type.
    pub fn kind(&self) -> &'static str {
        match self {
            Server::Stdio(s) if s.detection == "fastmcp" => "fastmcp",
            Server::Stdio(_) => "stdio",
            Server::Http(_) => "http",
            Server::Sse(_) => "sse",
        }
    }
}

/// The stdio server a package declares, or why there is none.
pub fn local(package: &Path) -> Result<Stdio, String> {
    let mut dir = package.to_path_buf();
    // A ZIP of one folder: the package is that folder.
    if declaration(&dir).is_none()
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let entries: Vec<_> = entries.filter_map(Result::ok).collect();
        if let [only] = entries.as_slice()
            && only.path().is_dir()
        {
            dir = only.path();
        }
    }
    match declaration(&dir) {
        Some(Declaration::Json(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("mcp.json: {e}"))?;
            let json: Value =
                serde_json::from_str(&text).map_err(|e| format!("mcp.json is not JSON: {e}"))?;
            let (_, entry) = json
                .get("mcpServers")
                .and_then(Value::as_object)
                .and_then(|m| m.iter().next())
                .ok_or("mcp.json has no mcpServers entry")?;
            let command = entry
                .get("command")
                .and_then(Value::as_str)
                .filter(|c| !c.trim().is_empty())
                .ok_or("the mcp.json entry has no command")?;
            let args = entry
                .get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Ok(Stdio {
                package: dir,
                command: command.to_owned(),
                args,
                detection: "mcp.json",
            })
        }
        Some(Declaration::Script(name)) => {
            let source = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            Ok(Stdio {
                package: dir,
                command: "python3".into(),
                args: vec![name.to_owned()],
                detection: if source.contains("FastMCP") {
                    "fastmcp"
                } else {
                    "python_script"
                },
            })
        }
        None => Err(
            "the package declares no MCP server: add mcp.json (mcpServers with command and args) or a server.py at its top"
                .into(),
        ),
    }
}

enum Declaration {
    Json(PathBuf),
    Script(&'static str),
}

fn declaration(dir: &Path) -> Option<Declaration> {
    let json = dir.join("mcp.json");
    if json.is_file() {
        return Some(Declaration::Json(json));
    }
    ["server.py", "main.py"]
        .into_iter()
        .find(|n| dir.join(n).is_file())
        .map(Declaration::Script)
}

/// A remote server from its configuration (`url`, optional `type`, `headers`); `${NAME}`
/// in the URL and header values resolve to `owner`'s stored key NAME.
pub async fn remote(
    config: &Map<String, Value>,
    owner: &str,
    secrets: &dyn Secrets,
) -> Result<Server, String> {
    let url = config
        .get("url")
        .or_else(|| config.get("serverUrl"))
        .and_then(Value::as_str)
        .filter(|u| !u.trim().is_empty())
        .ok_or("the server configuration has no url")?;
    let mut used = Vec::new();
    let url = resolve(url, owner, secrets, &mut used).await?;
    let mut headers = Vec::new();
    if let Some(h) = config.get("headers").and_then(Value::as_object) {
        for (name, value) in h {
            let value = value.as_str().ok_or("header values must be strings")?;
            headers.push((
                name.clone(),
                resolve(value, owner, secrets, &mut used).await?,
            ));
        }
    }
    let kind = config.get("type").or_else(|| config.get("transport"));
    let sse = match kind.and_then(Value::as_str) {
        Some("sse") => true,
        Some(_) => false,
        None => url
            .split(['?', '#'])
            .next()
            .is_some_and(|p| p.trim_end_matches('/').ends_with("/sse")),
    };
    let remote = Remote {
        url,
        headers,
        secrets: used,
    };
    Ok(if sse {
        Server::Sse(remote)
    } else {
        Server::Http(remote)
    })
}

/// `text` with every `${NAME}` replaced by the stored key NAME; an unknown name is an error
/// that names it (never its value).
async fn resolve(
    text: &str,
    owner: &str,
    secrets: &dyn Secrets,
    used: &mut Vec<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or("an unterminated ${ in the configuration")?;
        let name = &after[..end];
        let value = secrets
            .value(owner, name)
            .await
            .ok_or_else(|| format!("no stored key named {name:?}"))?;
        out.push_str(&value);
        used.push(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Keys;

    #[async_trait::async_trait]
    impl Secrets for Keys {
        async fn value(&self, owner: &str, name: &str) -> Option<String> {
            (owner == "u1" && name == "TOKEN").then(|| "s3cret".to_owned())
        }
    }

    #[tokio::test]
    async fn references_resolve_and_the_kind_follows_type_or_the_url() {
        let cfg = serde_json::json!({"url": "http://h/sse", "headers": {"Authorization": "Bearer ${TOKEN}"}});
        let Server::Sse(r) = remote(cfg.as_object().unwrap(), "u1", &Keys)
            .await
            .unwrap_or_else(|_| panic!("sse"))
        else {
            panic!("not sse")
        };
        assert_eq!(
            r.headers,
            vec![("Authorization".into(), "Bearer s3cret".into())]
        );
        assert_eq!(
            Server::Sse(r).redact("failed: http://h/?k=s3cret".into()),
            "failed: http://h/?k=***"
        );
        let cfg = serde_json::json!({"url": "http://h/mcp", "type": "http"});
        assert!(matches!(
            remote(cfg.as_object().unwrap(), "u1", &Keys).await,
            Ok(Server::Http(_))
        ));
        let cfg = serde_json::json!({"url": "http://h/mcp", "headers": {"X": "${NOPE}"}});
        let err = remote(cfg.as_object().unwrap(), "u1", &Keys)
            .await
            .err()
            .unwrap();
        assert!(err.contains("NOPE"), "{err}");
    }
}
