//! Custom tools (SPEC.md "Custom tools", issue 16): users upload MCP servers, Python
//! functions and browser actions. [`store`] keeps the rows (with the uploaded bytes),
//! [`upload`] checks an upload against SPEC.md's rules, [`files`] materializes a tool's
//! files per replica, [`service`] is the gRPC `CustomToolService`, [`prompt`] writes a
//! general_code tool's system_prompt with the default model, [`general_code`] opens a
//! Python function as a tool. [`CustomTools`] is the run loop's [`Extensions`]: each kind
//! is opened by the [`Opener`] registered for it (lib.rs).

pub mod files;
pub mod general_code;
pub mod grpc;
pub mod prompt;
pub mod store;
pub mod upload;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::error::ApiError;
use sea_orm::DatabaseConnection;

use crate::tools::custom::{Inspector, Opener, Secrets, ToolRecord, ToolType};
use crate::tools::{ExtensionTool, Extensions, Opened, ToolCtx};

/// The caller's custom tools, stored and opened.
pub struct CustomTools {
    pub db: DatabaseConnection,
    /// `<data_dir>/agent/custom_tools`: the materialized files.
    pub root: PathBuf,
    /// One per tool type this replica can run; a type without one is reported, not run.
    pub openers: HashMap<ToolType, Arc<dyn Opener>>,
    pub secrets: Arc<dyn Secrets>,
    /// MCP inspection (crate::mcp); `None`: inspection answers that it is unavailable.
    pub inspector: Option<Arc<dyn Inspector>>,
}

impl CustomTools {
    pub fn new(db: DatabaseConnection, root: PathBuf) -> CustomTools {
        CustomTools {
            db,
            root,
            openers: HashMap::new(),
            secrets: Arc::new(crate::tools::custom::NoSecrets),
            inspector: None,
        }
    }

    /// Registers the opener of `kind` (replacing one).
    /// Resolves stored keys for the openers (MCP headers and environment references).
    pub fn with_secrets(mut self, secrets: Arc<dyn Secrets>) -> CustomTools {
        self.secrets = secrets;
        self
    }

    pub fn with_opener(mut self, kind: ToolType, opener: Arc<dyn Opener>) -> CustomTools {
        self.openers.insert(kind, opener);
        self
    }

    /// The directory of a stored tool's file on this replica (`None` without a file).
    pub async fn files_of(&self, record: &ToolRecord) -> Result<Option<PathBuf>, String> {
        // Already on this replica's disk: the bytes stay in the database.
        let hash = store::file_hash(&self.db, &record.owner_id, &record.id)
            .await
            .map_err(|e| e.message)?;
        match hash {
            None => return Ok(None),
            Some(sha) => {
                let dir = files::dir_of(&self.root, &record.id, &sha);
                if dir.is_dir() {
                    return Ok(Some(dir));
                }
            }
        }
        let file = store::file(&self.db, &record.owner_id, &record.id)
            .await
            .map_err(|e| e.message)?;
        match file {
            None => Ok(None),
            Some(f) => files::materialize(&self.root, &record.id, f)
                .await
                .map(Some),
        }
    }

    async fn open_one(&self, record: &ToolRecord, ctx: &ToolCtx) -> Result<Opened, String> {
        let Some(opener) = self.openers.get(&record.tool_type) else {
            return Err(format!(
                "custom tool {} ({}) is not available on this server: no runtime for {} tools is installed",
                record.tool_name,
                record.tool_type.as_str(),
                record.tool_type.as_str()
            ));
        };
        let dir = self.files_of(record).await?;
        opener
            .open(record, dir.as_deref(), ctx, self.secrets.as_ref())
            .await
    }
}

/// tool_usage_mode holds `runner` (agent runs; absent means both modes).
fn runs_in_agent(record: &ToolRecord) -> bool {
    match record
        .args
        .get("tool_usage_mode")
        .and_then(|m| m.as_array())
    {
        Some(modes) => modes.iter().any(|m| m.as_str() == Some("runner")),
        None => true,
    }
}

#[async_trait::async_trait]
impl Extensions for CustomTools {
    async fn tools(&self, caller: &Caller) -> Result<Vec<ExtensionTool>, ApiError> {
        let mut seen = std::collections::HashSet::new();
        // One entry per name, the newest (as open() opens it), in upload order.
        let mut tools: Vec<ExtensionTool> = store::list(&self.db, &caller.user_id)
            .await?
            .into_iter()
            .rev()
            .filter(runs_in_agent)
            .filter(|r| seen.insert(r.tool_name.clone()))
            .map(|r| ExtensionTool {
                description: r.arg("description").to_owned(),
                enable_by_default: r
                    .args
                    .get("enable_by_default")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(true),
                name: r.tool_name,
            })
            .collect();
        tools.reverse();
        Ok(tools)
    }

    async fn open(&self, caller: &Caller, names: &[String], ctx: &ToolCtx) -> Opened {
        let mut opened = Opened::default();
        let records = match store::list(&self.db, &caller.user_id).await {
            Ok(r) => r,
            Err(e) => {
                opened
                    .notes
                    .push(format!("custom tools could not be read: {}", e.message));
                return opened;
            }
        };
        // One tool per name, the newest (the list is oldest first): two uploads of the
        // same name must not offer the model two tools of one name.
        let mut newest: Vec<&ToolRecord> = Vec::new();
        for r in records
            .iter()
            .filter(|r| names.contains(&r.tool_name) && runs_in_agent(r))
        {
            newest.retain(|n| n.tool_name != r.tool_name);
            newest.push(r);
        }
        for record in newest {
            match self.open_one(record, ctx).await {
                Ok(o) => {
                    opened.tools.extend(o.tools);
                    opened.instructions.extend(o.instructions);
                    opened.notes.extend(o.notes);
                }
                Err(e) => opened.notes.push(e),
            }
        }
        opened
    }
}
