//! The shapes the custom-tool modules share, so that each kind is opened by its own module
//! without knowing the others: storage (custom_tools/) hands a [`ToolRecord`] and the
//! tool's files to the [`Opener`] registered for its [`ToolType`] (MCP for local_mcp and
//! remote_mcp, general_code, browser actions); [`Secrets`] resolves a user's stored keys
//! (custom agents' keys) inside a run; [`Inspector`] answers MCP inspection.

use std::path::Path;

use docchat_common::Caller;
use docchat_common::error::ApiError;
use docchat_proto::agent::v1 as pb;

use super::{Opened, ToolCtx};

/// SPEC.md's tool_type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolType {
    LocalMcp,
    RemoteMcp,
    BrowserAction,
    GeneralCode,
}

impl ToolType {
    pub const ALL: [ToolType; 4] = [
        ToolType::LocalMcp,
        ToolType::RemoteMcp,
        ToolType::BrowserAction,
        ToolType::GeneralCode,
    ];

    pub fn parse(s: &str) -> Option<ToolType> {
        ToolType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolType::LocalMcp => "local_mcp",
            ToolType::RemoteMcp => "remote_mcp",
            ToolType::BrowserAction => "browser_action",
            ToolType::GeneralCode => "general_code",
        }
    }
}

/// One stored custom tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    pub id: String,
    pub owner_id: String,
    pub owner_email: String,
    /// What agent_tools names it by (for remote_mcp: the server's name).
    pub tool_name: String,
    pub tool_type: ToolType,
    /// tool_args as stored: a JSON object (remote_mcp: `mcp_config_json` holds this one
    /// server's configuration under `mcpServers`).
    pub args: serde_json::Value,
    /// The uploaded file's name; `None` for a remote_mcp without one.
    pub file_name: Option<String>,
}

impl ToolRecord {
    /// A string field of tool_args ("" when absent).
    pub fn arg(&self, key: &str) -> &str {
        self.args.get(key).and_then(|v| v.as_str()).unwrap_or("")
    }
}

/// Makes one kind of custom tool callable in a run.
#[async_trait::async_trait]
pub trait Opener: Send + Sync {
    /// `files`: the directory holding the tool's uploaded file (as uploaded, or the ZIP's
    /// contents when extracted) on this replica's disk, read-only for the tool; `None`
    /// without a file. An `Err` is a note in the run's history; the run goes on without
    /// the tool.
    async fn open(
        &self,
        record: &ToolRecord,
        files: Option<&Path>,
        ctx: &ToolCtx,
        secrets: &dyn Secrets,
    ) -> Result<Opened, String>;
}

/// A user's stored keys (POST /agents/keys), by name, decrypted only inside a run or an
/// inspection; never returned by an API.
#[async_trait::async_trait]
pub trait Secrets: Send + Sync {
    /// The value of `owner_id`'s key called `name`, if there is one.
    async fn value(&self, owner_id: &str, name: &str) -> Option<String>;
}

/// No stored keys (tests, a replica without them).
pub struct NoSecrets;

#[async_trait::async_trait]
impl Secrets for NoSecrets {
    async fn value(&self, _owner_id: &str, _name: &str) -> Option<String> {
        None
    }
}

/// What an inspection looks at: exactly one mode of the request.
pub enum InspectTarget<'a> {
    /// A stored MCP tool and its files.
    Tool(&'a ToolRecord, Option<&'a Path>),
    /// `servers`: server name → configuration, before adding.
    Servers(serde_json::Map<String, serde_json::Value>),
    /// An MCP package (`file_name`, decoded `file_data_base64`).
    File { name: &'a str, data: &'a [u8] },
}

/// MCP inspection (POST /agents/mcp/inspect_tool): starts or connects to the server(s),
/// lists their tools, optionally has `model` review them. Semantic failures are
/// `status: error` in the answer, never an Err.
#[async_trait::async_trait]
pub trait Inspector: Send + Sync {
    async fn inspect(
        &self,
        caller: &Caller,
        target: InspectTarget<'_>,
        model: &str,
        secrets: &dyn Secrets,
    ) -> Result<pb::InspectResult, ApiError>;
}
