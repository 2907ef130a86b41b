//! The built-in tools, one file each, behind [`Tool`]; [`Catalog`] holds them by name.
//! A tool's failure is a message the model reads (`Err(String)`), never an abort of the run.

mod ask_model;
pub mod custom;
mod fetch_url;
mod list_files;
pub mod memory;
mod python;
mod read_file;
mod search_documents;
mod shell;
mod write_file;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_proto::agent::v1 as pb;
use docchat_sandbox::{CodeRunner, UserDisk};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A custom tool of the caller's as the catalogue lists it (see [`Extensions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionTool {
    /// What agent_tools and the tool preference name it by (its tool_name).
    pub name: String,
    pub description: String,
    /// tool_args.enable_by_default: offered in every new run of its owner.
    pub enable_by_default: bool,
}

/// Custom tools made callable for one run.
#[derive(Default)]
pub struct Opened {
    /// The tools offered to the model (an MCP server gives one per tool it lists). Dropping
    /// them ends what they started (MCP server processes, sessions).
    pub tools: Vec<Arc<dyn Tool>>,
    /// Lines for the system prompt (a general_code tool's system_prompt).
    pub instructions: Vec<String>,
    /// What could not be opened and why: noted in the run's history; the run goes on
    /// without it.
    pub notes: Vec<String>,
}

/// What users added to the agent, resolved per caller: their custom tools (custom_tools/).
/// The run loop knows tools only through this seam.
#[async_trait::async_trait]
pub trait Extensions: Send + Sync {
    /// The caller's custom tools, in the order the catalogue lists them.
    async fn tools(
        &self,
        caller: &Caller,
    ) -> Result<Vec<ExtensionTool>, docchat_common::error::ApiError>;

    /// Makes the named custom tools (names from [`Extensions::tools`]) callable in one run
    /// whose tools run with `ctx`'s workspace and limits.
    async fn open(&self, caller: &Caller, names: &[String], ctx: &ToolCtx) -> Opened;
}

/// What a tool gave back.
#[derive(Debug, Clone, Default)]
pub struct ToolOutput {
    /// What the model is shown.
    pub text: String,
    /// Document excerpts the answer may cite (search hits).
    pub references: Vec<pb::Excerpt>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            references: Vec::new(),
        }
    }
}

/// Asks the run's model about a piece of text (booked like every model call of the run).
#[async_trait::async_trait]
pub trait Asker: Send + Sync {
    async fn ask(&self, question: &str, text: &str) -> Result<String, String>;
}

/// What every tool call of a run gets.
#[derive(Clone)]
pub struct ToolCtx {
    pub caller: Caller,
    /// The session's workspace (exists).
    pub workspace: PathBuf,
    /// Empty without a collection.
    pub collection_id: String,
    /// Stop, the run's deadline or the call's timeout.
    pub cancel: CancellationToken,
    pub timeout: Duration,
    pub max_memory: Option<u64>,
    /// The caller's other workspaces and their disk total (for the code tools' runs).
    pub disk: UserDisk,
    pub deps: Arc<ToolDeps>,
    pub asker: Option<Arc<dyn Asker>>,
}

/// Services the tools use, shared by every run of the replica.
pub struct ToolDeps {
    pub code: Arc<dyn CodeRunner>,
    /// ingest-service (document search); `None` in tests without it.
    pub clients: Option<Clients>,
    /// The session collection's documents for the code tools; `None` without ingest.
    pub shelf: Option<Arc<crate::shelf::Shelf>>,
    /// fetch_url is on (DOCCHAT_AGENT_FETCH is not `off`).
    pub fetch: bool,
    /// Hosts fetch_url may reach although they resolve to loopback or private addresses
    /// (tests); empty in production.
    pub fetch_allow: Vec<String>,
    /// Bytes one workspace may hold (`DOCCHAT_WORKSPACE_QUOTA_MB`): write_file keeps to it.
    pub workspace_quota: u64,
}

impl ToolCtx {
    /// The session collection's documents, brought up to date (none without a collection;
    /// a failure is logged and the code runs without them).
    pub async fn documents(&self) -> Option<PathBuf> {
        let shelf = self.deps.shelf.as_ref()?;
        if self.collection_id.is_empty() {
            return None;
        }
        match shelf.open(&self.caller, &self.collection_id).await {
            Ok(dir) => Some(dir),
            Err(e) => {
                tracing::warn!(collection = %self.collection_id, error = %e.message, "documents not on the shelf");
                None
            }
        }
    }
}

#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The JSON schema of the arguments.
    fn parameters(&self) -> Value;
    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String>;

    /// Whether a call may change the workspace (its files are stored after such calls
    /// only). Tools that only read say so.
    fn writes(&self) -> bool {
        true
    }
}

/// Every tool by name, in catalogue order.
#[derive(Clone)]
pub struct Catalog {
    tools: Vec<Arc<dyn Tool>>,
}

impl Catalog {
    /// The built-in tools.
    pub fn builtin() -> Catalog {
        Catalog {
            tools: vec![
                Arc::new(python::Python),
                Arc::new(shell::Shell),
                Arc::new(read_file::ReadFile),
                Arc::new(write_file::WriteFile),
                Arc::new(list_files::ListFiles),
                Arc::new(search_documents::SearchDocuments),
                Arc::new(fetch_url::FetchUrl),
                Arc::new(ask_model::AskModel),
            ],
        }
    }

    /// Adds (or replaces) a tool: tests add slow or failing ones.
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Catalog {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.tools.iter().map(|t| t.name())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Names not in the catalogue.
    pub fn unknown<'a>(&self, names: &'a [String]) -> Vec<&'a str> {
        names
            .iter()
            .filter(|n| self.get(n).is_none())
            .map(String::as_str)
            .collect()
    }
}

/// Cuts `text` to at most `max` bytes (on a character boundary), saying so.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}\n… [cut: {} more bytes]", &text[..cut], text.len() - cut)
}

/// A string argument.
pub fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string argument {key:?}"))
}
