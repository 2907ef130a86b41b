//! Run admission: what is decided before a run starts, the same for `Run` and `CheckRun`:
//! the arguments, the custom agent they name, the tools (the caller's choice, preference or
//! the agent's defaults, with the caller's custom tools) and the model ([`AgentModels`]).
//! [`Admission::prepare`] then readies the session's workspace for an admitted run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::{ChatModel, ModelEntry, Registry};
use docchat_proto::agent::v1 as pb;
use sea_orm::DatabaseConnection;

use super::args::{self, RunArgs, ToolSelection};
use super::{Engine, RunRequest};
use crate::custom_agents::run::{CustomRun, Runner};
use crate::tools::ExtensionTool;
use crate::{preferences, workspaces};

/// Tool-capable chat models, ready to call.
pub struct AgentModels {
    registry: Registry,
    models: HashMap<String, Arc<ChatModel>>,
}

impl AgentModels {
    pub fn new(registry: Registry) -> AgentModels {
        let models = registry
            .chat_models()
            .filter(|e| ChatModel::calls_tools(e))
            .filter_map(|e| {
                match ChatModel::from_entry(e, &docchat_inference::LocalOptions::default()) {
                    Ok(m) => Some((e.name.clone(), Arc::new(m))),
                    Err(err) => {
                        tracing::warn!(model = %e.name, error = %err, "agent model unusable");
                        None
                    }
                }
            })
            .collect();
        AgentModels { registry, models }
    }

    /// `requested` (empty or `auto`: the default model when it calls tools, else the first
    /// that does) as a tool-capable model, or why not (400).
    pub fn pick(&self, requested: &str) -> ApiResult<(ModelEntry, Arc<ChatModel>)> {
        let entry = if requested.is_empty() || requested == "auto" {
            self.registry
                .default_chat_model()
                .filter(|e| ChatModel::calls_tools(e))
                .or_else(|| self.registry.chat_models().find(|e| ChatModel::calls_tools(e)))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "no configured model can call tools, so the agent cannot run; mark a tool-calling model with tools = true in the models file",
                    )
                })?
        } else {
            let entry = self
                .registry
                .resolve(requested)
                .ok_or_else(|| ApiError::bad_request(format!("model {requested} not found")))?;
            if !ChatModel::calls_tools(entry) {
                let why = if entry.provider == "local" {
                    "it is a local model, and local models cannot call tools"
                } else {
                    "the models file does not mark it tools = true"
                };
                return Err(ApiError::bad_request(format!(
                    "model {} cannot be used by the agent: {why}; choose a tool-calling model or llm \"auto\"",
                    entry.name
                )));
            }
            entry
        };
        let model = self.models.get(&entry.name).cloned().ok_or_else(|| {
            ApiError::new(
                docchat_common::error::ErrorCode::Unavailable,
                format!("model {} is not usable (see the service log)", entry.name),
            )
        })?;
        Ok((entry.clone(), model))
    }
}

/// What admission needs; one per replica.
pub struct Admission {
    pub db: DatabaseConnection,
    pub engine: Engine,
    pub models: AgentModels,
    /// Custom agents (issue 16), run by name; `None` in tests without them.
    pub custom_agents: Option<Arc<Runner>>,
    /// data_dir/agent/workspaces
    pub workspaces: PathBuf,
    /// Bytes one user's workspaces may hold together (`DOCCHAT_USER_DISK_QUOTA_MB`).
    pub user_disk_quota: u64,
}

/// A run admission accepted.
pub struct Admitted {
    pub args: RunArgs,
    /// Built-in and custom tool names, checked.
    pub tools: Vec<String>,
    pub entry: ModelEntry,
    pub model: Arc<ChatModel>,
    pub custom: Option<CustomRun>,
}

impl Admitted {
    /// The limits and choices the caller is told before the run's first event.
    pub fn accepted(&self) -> pb::RunAccepted {
        pb::RunAccepted {
            max_turns: self.args.max_turns,
            total_timeout_seconds: self.args.total_timeout.as_secs().min(u64::from(u32::MAX))
                as u32,
            tools: self.tools.clone(),
            model: self.entry.name.clone(),
        }
    }
}

impl Admission {
    /// Checks a run of `caller`'s with the model `model` and the arguments `args_json`:
    /// a 400 names what is wrong.
    pub async fn admit(
        &self,
        caller: &Caller,
        model: &str,
        args_json: &str,
        has_collection: bool,
    ) -> ApiResult<Admitted> {
        let args = args::parse(args_json)?;
        let custom = self.custom_agent(caller, &args).await?;
        let tools = match custom {
            // The agent brings its own tools (its associated MCP servers).
            Some(_) => Vec::new(),
            None => self.tools_for(caller, &args, has_collection).await?,
        };
        let (entry, model) = self.models.pick(model)?;
        Ok(Admitted {
            args,
            tools,
            entry,
            model,
            custom,
        })
    }

    /// The session's workspace for an admitted run: recorded as the caller's, created, and
    /// the caller's other workspaces counted against their disk total.
    pub async fn prepare(
        &self,
        caller: Caller,
        start: pb::RunStart,
        admitted: Admitted,
    ) -> ApiResult<RunRequest> {
        let workspace = workspaces::session_dir(&self.workspaces, &start.session_id)?;
        workspaces::record(
            &self.db,
            &start.session_id,
            &caller.user_id,
            &start.session_preview,
        )
        .await?;
        tokio::fs::create_dir_all(&workspace)
            .await
            .map_err(|e| ApiError::internal("creating the workspace", e))?;
        let disk = workspaces::user_disk(
            &self.db,
            &self.workspaces,
            &caller.user_id,
            &start.session_id,
            self.user_disk_quota,
        )
        .await?;
        let Admitted {
            args,
            tools,
            entry,
            model,
            custom,
        } = admitted;
        Ok(RunRequest {
            caller,
            start,
            args,
            tools,
            workspace,
            disk,
            model,
            entry,
            custom,
        })
    }

    /// The caller's custom tools (none without extensions).
    pub async fn custom_tools(&self, caller: &Caller) -> ApiResult<Vec<ExtensionTool>> {
        match &self.engine.extensions {
            Some(ext) => ext.tools(caller).await,
            None => Ok(Vec::new()),
        }
    }

    /// Tool names neither built in nor among the caller's custom tools.
    pub fn unknown_tools<'a>(&self, names: &'a [String], custom: &[ExtensionTool]) -> Vec<&'a str> {
        self.engine
            .catalog
            .unknown(names)
            .into_iter()
            .filter(|n| !custom.iter().any(|c| c.name == *n))
            .collect()
    }

    /// Whether the built-in tool `name` can work on this replica.
    pub fn enabled(&self, name: &str) -> bool {
        let deps = &self.engine.deps;
        match name {
            "fetch_url" => deps.fetch,
            "search_documents" => deps.clients.is_some(),
            "python" | "shell" => deps.code.available(),
            _ => true,
        }
    }

    /// The tools of a run: checked names, the caller's preference or the agent's defaults;
    /// the caller's custom tools enabled by default join every run.
    async fn tools_for(
        &self,
        caller: &Caller,
        args: &RunArgs,
        has_collection: bool,
    ) -> ApiResult<Vec<String>> {
        let catalog = &self.engine.catalog;
        let custom = self.custom_tools(caller).await?;
        let known = |n: &String| catalog.get(n).is_some() || custom.iter().any(|c| &c.name == n);
        let mut names: Vec<String> = match &args.tools {
            ToolSelection::All => catalog
                .names()
                .map(str::to_owned)
                .chain(custom.iter().map(|c| c.name.clone()))
                .collect(),
            ToolSelection::Names(names) => {
                let unknown = self.unknown_tools(names, &custom);
                if !unknown.is_empty() {
                    return Err(ApiError::bad_request(format!(
                        "unknown agent tool(s): {}; the tools are: {}",
                        unknown.join(", "),
                        catalog
                            .names()
                            .chain(custom.iter().map(|c| c.name.as_str()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                names.clone()
            }
            ToolSelection::Auto => match preferences::get(&self.db, &caller.user_id).await? {
                Some(pref) if !pref.is_empty() => pref.into_iter().filter(known).collect(),
                _ => args
                    .agent_type
                    .default_tools()
                    .iter()
                    .filter(|n| self.enabled(n))
                    .map(|n| (*n).to_owned())
                    .collect(),
            },
        };
        names.extend(
            custom
                .iter()
                .filter(|c| c.enable_by_default)
                .map(|c| c.name.clone()),
        );
        if !has_collection && args.tools != ToolSelection::All {
            names.retain(|n| {
                n != "search_documents" || matches!(args.tools, ToolSelection::Names(_))
            });
        }
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        Ok(names)
    }

    /// The caller's custom agent agent_type names; a name that is neither built in nor one
    /// of theirs is the 400 of [`args::unknown_agent_type`].
    async fn custom_agent(&self, caller: &Caller, args: &RunArgs) -> ApiResult<Option<CustomRun>> {
        let Some(name) = &args.custom_agent else {
            return Ok(None);
        };
        let found = match &self.custom_agents {
            Some(runner) => runner.find(&caller.user_id, name).await?,
            None => None,
        };
        found
            .map(Some)
            .ok_or_else(|| args::unknown_agent_type(name))
    }
}
