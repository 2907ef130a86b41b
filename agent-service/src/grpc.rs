//! AgentService over gRPC: Run (start, then control; events until finished), CheckRun,
//! the tool catalogue and preferences, the built-in agents, and the files of a session's
//! workspace with their directory stats (disk walks in [`crate::files`], ownership in
//! [`crate::workspaces`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::auth::caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::{ChatModel, ModelEntry, Registry};
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::agent_service_server::AgentService;
use docchat_proto::common::v1::Empty;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status, Streaming};

use crate::custom_agents::run::CustomRun;
use crate::run::agents::AgentType;
use crate::run::args::{self, RunArgs, ToolSelection};
use crate::run::control::Control;
use crate::run::{Engine, RunRequest};
use crate::tools::ExtensionTool;
use crate::workspaces::session_dir;
use crate::{files, preferences, workspaces};

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

#[derive(Clone)]
pub struct AgentGrpc {
    pub db: DatabaseConnection,
    pub engine: Engine,
    pub models: Arc<AgentModels>,
    /// data_dir/agent/workspaces
    pub workspaces: PathBuf,
    /// Bytes one user's workspaces may hold together (`DOCCHAT_USER_DISK_QUOTA_MB`).
    pub user_disk_quota: u64,
    pub tracker: TaskTracker,
    /// The service's shutdown: running runs stop.
    pub shutdown: CancellationToken,
    /// Custom agents (issue 16): run by name, listed with the agents; `None` in tests
    /// without them.
    pub custom_agents: Option<Arc<crate::custom_agents::run::Runner>>,
    /// Each run's job in the history.
    pub jobs: crate::jobs::RunJobs,
}

impl AgentGrpc {
    /// The caller's custom tools (none without extensions).
    async fn custom_tools(&self, caller: &Caller) -> ApiResult<Vec<ExtensionTool>> {
        match &self.engine.extensions {
            Some(ext) => ext.tools(caller).await,
            None => Ok(Vec::new()),
        }
    }

    /// Tool names neither built in nor among the caller's custom tools.
    fn unknown_tools<'a>(&self, names: &'a [String], custom: &[ExtensionTool]) -> Vec<&'a str> {
        self.engine
            .catalog
            .unknown(names)
            .into_iter()
            .filter(|n| !custom.iter().any(|c| c.name == *n))
            .collect()
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
                    .filter(|n| enabled(&self.engine, n))
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

    /// Deletes the session's documents, its manifest and its workspace on this disk.
    async fn delete_files(
        &self,
        caller: &Caller,
        id: &str,
        dir: &std::path::Path,
    ) -> ApiResult<()> {
        if let Some(stored) = &self.engine.stored {
            stored.delete(caller, id, dir).await?;
        }
        // remove_dir_all removes links, never what they point to.
        match tokio::fs::remove_dir_all(dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ApiError::internal("deleting the session's files", e)),
        }
    }

    async fn check(
        &self,
        caller: &Caller,
        model: &str,
        args_json: &str,
        has_collection: bool,
    ) -> ApiResult<(
        RunArgs,
        Vec<String>,
        ModelEntry,
        Arc<ChatModel>,
        Option<CustomRun>,
    )> {
        let args = args::parse(args_json)?;
        let custom = self.custom_agent(caller, &args).await?;
        let tools = match custom {
            // The agent brings its own tools (its associated MCP servers).
            Some(_) => Vec::new(),
            None => self.tools_for(caller, &args, has_collection).await?,
        };
        let (entry, model) = self.models.pick(model)?;
        Ok((args, tools, entry, model, custom))
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

fn enabled(engine: &Engine, name: &str) -> bool {
    match name {
        "fetch_url" => engine.deps.fetch,
        "search_documents" => engine.deps.clients.is_some(),
        "python" | "shell" => engine.deps.code.available(),
        _ => true,
    }
}

fn accepted(args: &RunArgs, tools: &[String], model: &ModelEntry) -> pb::RunAccepted {
    pb::RunAccepted {
        max_turns: args.max_turns,
        total_timeout_seconds: args.total_timeout.as_secs().min(u64::from(u32::MAX)) as u32,
        tools: tools.to_vec(),
        model: model.name.clone(),
    }
}

type EventStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::RunEvent, Status>> + Send>>;

#[tonic::async_trait]
impl AgentService for AgentGrpc {
    type RunStream = EventStream;

    async fn run(
        &self,
        request: Request<Streaming<pb::RunInput>>,
    ) -> Result<Response<EventStream>, Status> {
        let caller = caller(&request)?;
        let mut input = request.into_inner();
        let start = match input.message().await? {
            Some(pb::RunInput {
                input: Some(pb::run_input::Input::Start(start)),
            }) => start,
            _ => {
                return Err(
                    ApiError::bad_request("the first input of a run must be `start`").into(),
                );
            }
        };
        let (args, tools, entry, model, custom) = self
            .check(
                &caller,
                &start.model,
                &start.agent_args_json,
                !start.collection_id.is_empty(),
            )
            .await?;
        let workspace = session_dir(&self.workspaces, &start.session_id)?;
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
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::RunEvent>(64);
        let first = pb::RunEvent {
            event: Some(pb::run_event::Event::Accepted(accepted(
                &args, &tools, &entry,
            ))),
        };
        let _ = tx.send(first).await;
        let control = Arc::new(Control::default());
        // Control inputs until the input closes (which stops the run, as agent.proto says),
        // the run ends, or the service shuts down (which stops the run: it ends, says so
        // and its stream closes, so the server can drain).
        let reader = control.clone();
        let shutdown = self.shutdown.clone();
        self.tracker.spawn(async move {
            loop {
                let next = tokio::select! {
                    next = input.message() => next,
                    () = reader.stop_token().cancelled() => return,
                    () = shutdown.cancelled() => {
                        let _ = reader.apply("stop");
                        return;
                    }
                };
                match next {
                    Ok(Some(pb::RunInput {
                        input: Some(pb::run_input::Input::Control(word)),
                    })) => {
                        if let Err(e) = reader.apply(&word) {
                            tracing::debug!(error = %e, "control ignored");
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        let _ = reader.apply("stop");
                        return;
                    }
                }
                if reader.stopped() {
                    return;
                }
            }
        });
        let engine = self.engine.clone();
        let jobs = self.jobs.clone();
        let job = jobs.started(&caller, &start.collection_id).await;
        let req = RunRequest {
            caller,
            start,
            args,
            tools,
            workspace,
            disk,
            model,
            entry,
            custom,
        };
        self.tracker.spawn(async move {
            let finished = engine.run(req, &control, &tx).await;
            jobs.finished(job, &finished).await;
            let _ = tx
                .send(pb::RunEvent {
                    event: Some(pb::run_event::Event::Finished(finished)),
                })
                .await;
            // The reader ends with the input; stop it if the caller keeps the input open.
            control.stop_token().cancel();
        });
        let stream =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
            );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn check_run(
        &self,
        request: Request<pb::RunCheck>,
    ) -> Result<Response<pb::RunAccepted>, Status> {
        let caller = caller(&request)?;
        let r = request.into_inner();
        let (args, tools, entry, _, _) = self
            .check(&caller, &r.model, &r.agent_args_json, r.has_collection)
            .await?;
        Ok(Response::new(accepted(&args, &tools, &entry)))
    }

    async fn list_tools(&self, request: Request<Empty>) -> Result<Response<pb::ToolList>, Status> {
        let caller = caller(&request)?;
        let defaults = AgentType::General.default_tools();
        let custom = self.custom_tools(&caller).await?;
        let tools = self
            .engine
            .catalog
            .iter()
            .map(|t| pb::Tool {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                enabled: enabled(&self.engine, t.name()),
                default: defaults.contains(&t.name()),
                extendable: false,
                api_keys: Some(pb::ApiKeys::default()),
            })
            .chain(custom.into_iter().map(|c| pb::Tool {
                name: c.name,
                description: c.description,
                enabled: true,
                default: c.enable_by_default,
                extendable: false,
                api_keys: Some(pb::ApiKeys::default()),
            }))
            .collect();
        Ok(Response::new(pb::ToolList { tools }))
    }

    async fn get_tool_preference(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::ToolPreference>, Status> {
        let caller = caller(&request)?;
        let tools = preferences::get(&self.db, &caller.user_id)
            .await?
            .unwrap_or_default();
        Ok(Response::new(pb::ToolPreference { tools }))
    }

    async fn set_tool_preference(
        &self,
        request: Request<pb::ToolPreference>,
    ) -> Result<Response<Empty>, Status> {
        let caller = caller(&request)?;
        let mut tools = request.into_inner().tools;
        let custom = self.custom_tools(&caller).await?;
        let unknown = self.unknown_tools(&tools, &custom);
        if !unknown.is_empty() {
            return Err(ApiError::bad_request(format!(
                "unknown agent tool(s): {}",
                unknown.join(", ")
            ))
            .into());
        }
        let mut seen = std::collections::HashSet::new();
        tools.retain(|t| seen.insert(t.clone()));
        preferences::set(&self.db, &caller.user_id, &tools).await?;
        Ok(Response::new(Empty {}))
    }

    async fn delete_tool_preference(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<Empty>, Status> {
        let caller = caller(&request)?;
        preferences::delete(&self.db, &caller.user_id).await?;
        Ok(Response::new(Empty {}))
    }

    async fn list_agents(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::AgentList>, Status> {
        let caller = caller(&request)?;
        let mut agents: Vec<pb::Agent> = AgentType::ALL
            .iter()
            .map(|a| pb::Agent {
                id: a.name().to_owned(),
                value: a.name().to_owned(),
                label: a.label().to_owned(),
                enabled: true,
                r#type: "built_in".into(),
                owner: String::new(),
                description: a.description().to_owned(),
                api_keys: Vec::new(),
                mcp_servers: Vec::new(),
            })
            .collect();
        if self.custom_agents.is_some() {
            agents.extend(crate::custom_agents::view::listed(&self.db, &caller.user_id).await?);
        }
        Ok(Response::new(pb::AgentList { agents }))
    }

    async fn list_session_files(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::SessionFileList>, Status> {
        let caller = caller(&request)?;
        let id = request.into_inner().session_id;
        let dir = session_dir(&self.workspaces, &id)?;
        let files = if workspaces::owned(&self.db, &id, &caller.user_id).await? {
            let session = id.clone();
            let local = blocking(move || files::list(&session, &dir)).await?;
            match &self.engine.stored {
                Some(stored) => stored.list(&id, local).await?,
                None => local,
            }
        } else {
            Vec::new()
        };
        Ok(Response::new(pb::SessionFileList { files }))
    }

    async fn delete_session_files(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<Empty>, Status> {
        let caller = caller(&request)?;
        let id = request.into_inner().session_id;
        let dir = session_dir(&self.workspaces, &id)?;
        if !workspaces::owned(&self.db, &id, &caller.user_id).await? {
            return Ok(Response::new(Empty {}));
        }
        workspaces::begin_deletion(&self.db, &id).await?;
        let deleted = self.delete_files(&caller, &id, &dir).await;
        workspaces::end_deletion(&self.db, &id).await?;
        deleted?;
        Ok(Response::new(Empty {}))
    }

    async fn session_directory_stats(
        &self,
        request: Request<pb::DirectoryStatsRequest>,
    ) -> Result<Response<pb::DirectoryStatsList>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let root = session_dir(&self.workspaces, &req.session_id)?;
        let owned = workspaces::owned(&self.db, &req.session_id, &caller.user_id).await?;
        let detailed = req.detail_level > 0;
        // The session's directory is its workspace, named by the session id; a directory
        // directly inside it is named by its name.
        // What the session stored counts whichever replica answers (its disk may lack it).
        let stored = if owned {
            stored_files(&self.db, &req.session_id).await?
        } else {
            Vec::new()
        };
        let (id, dir, stored) = match req.directory.as_deref() {
            None => (req.session_id.clone(), root, stored),
            Some(d) if d == req.session_id => (d.to_owned(), root, stored),
            Some(d) => {
                let inside: Vec<files::StoredFile> = stored
                    .into_iter()
                    .filter_map(|f| {
                        let path = f.path.strip_prefix(d)?.strip_prefix('/')?.to_owned();
                        Some(files::StoredFile { path, ..f })
                    })
                    .collect();
                let found = owned
                    && !d.is_empty()
                    && d != "."
                    && d != ".."
                    && !d.contains('/')
                    && (!inside.is_empty()
                        || std::fs::symlink_metadata(root.join(d)).is_ok_and(|m| m.is_dir()));
                if !found {
                    return Err(ApiError::not_found(format!("directory {d} not found")).into());
                }
                (d.to_owned(), root.join(d), inside)
            }
        };
        let stats = if owned {
            blocking(move || files::stats(&id, &dir, detailed, &stored)).await?
        } else {
            files::stats(&id, std::path::Path::new(""), detailed, &[])
        };
        Ok(Response::new(pb::DirectoryStatsList {
            directories: vec![stats],
        }))
    }

    async fn sandbox_load(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::SandboxLoadReport>, Status> {
        caller(&request)?;
        let (backend, load) = self.engine.deps.code.load().unwrap_or_default();
        Ok(Response::new(pb::SandboxLoadReport {
            backend: backend.into(),
            slots: load.total,
            user_slots: load.share,
            in_use: load.in_use,
            waiting: load.waiting,
            users_waiting: load.users_waiting,
        }))
    }

    async fn global_directory_stats(
        &self,
        request: Request<pb::GlobalDirectoryStatsRequest>,
    ) -> Result<Response<pb::GlobalDirectoryStatsList>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let limit = if req.limit == 0 {
            100
        } else {
            req.limit.min(1000)
        };
        let page = workspaces::page(
            &self.db,
            &caller.user_id,
            &req.filter_text,
            req.offset,
            limit,
        )
        .await?;
        let ids: Vec<String> = page.iter().map(|(id, _)| id.clone()).collect();
        let mut stored = crate::stored::manifest::entries_of(&self.db, &ids).await?;
        let page_stored: Vec<_> = page
            .into_iter()
            .map(|(session_id, chat_preview)| {
                let files = stored
                    .remove(&session_id)
                    .unwrap_or_default()
                    .into_iter()
                    .map(files::StoredFile::from)
                    .collect::<Vec<_>>();
                (session_id, chat_preview, files)
            })
            .collect();
        let root = self.workspaces.clone();
        let sessions = blocking(move || {
            page_stored
                .into_iter()
                .map(|(session_id, chat_preview, stored)| {
                    let stats = files::stats(&session_id, &root.join(&session_id), false, &stored);
                    pb::SessionDirectoryStats {
                        session_id,
                        chat_preview,
                        stats: vec![stats],
                    }
                })
                .collect()
        })
        .await?;
        Ok(Response::new(pb::GlobalDirectoryStatsList { sessions }))
    }
}

/// The session's files kept as documents (its manifest), relative to its workspace.
async fn stored_files(
    db: &sea_orm::DatabaseConnection,
    session_id: &str,
) -> Result<Vec<files::StoredFile>, Status> {
    Ok(crate::stored::manifest::entries(db, session_id)
        .await?
        .into_iter()
        .map(files::StoredFile::from)
        .collect())
}

/// Runs a disk walk off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal("walking the workspace", e))
}
