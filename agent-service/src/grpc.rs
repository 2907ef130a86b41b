//! AgentService over gRPC: Run (start, then control; events until finished), CheckRun,
//! the tool catalogue and preferences, the built-in agents, and the files of a session's
//! workspace with their directory stats. Each method unpacks, authorizes, calls and packs:
//! run admission is [`crate::run::admit`], the run [`crate::run`], disk walks
//! [`crate::files`], ownership [`crate::workspaces`].

use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::auth::caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::agent_service_server::AgentService;
use docchat_proto::common::v1::Empty;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::run::admit::Admission;
use crate::run::agents::AgentType;
use crate::run::control::Control;
use crate::workspaces::session_dir;
use crate::{files, preferences, workspaces};

#[derive(Clone)]
pub struct AgentGrpc {
    pub db: DatabaseConnection,
    /// Run admission (model, tools, custom agent) and the workspace it prepares.
    pub admission: Arc<Admission>,
    pub tracker: TaskTracker,
    /// The service's shutdown: running runs stop.
    pub shutdown: CancellationToken,
    /// Each run's job in the history.
    pub jobs: crate::jobs::RunJobs,
}

impl AgentGrpc {
    /// Deletes the session's documents, its manifest and its workspace on this disk.
    async fn delete_files(
        &self,
        caller: &Caller,
        id: &str,
        dir: &std::path::Path,
    ) -> ApiResult<()> {
        if let Some(stored) = &self.admission.engine.stored {
            stored.delete(caller, id, dir).await?;
        }
        // remove_dir_all removes links, never what they point to.
        match tokio::fs::remove_dir_all(dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ApiError::internal("deleting the session's files", e)),
        }
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
        let admitted = self
            .admission
            .admit(
                &caller,
                &start.model,
                &start.agent_args_json,
                !start.collection_id.is_empty(),
            )
            .await?;
        let accepted = admitted.accepted();
        let collection_id = start.collection_id.clone();
        let req = self.admission.prepare(caller, start, admitted).await?;
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::RunEvent>(64);
        let first = pb::RunEvent {
            event: Some(pb::run_event::Event::Accepted(accepted)),
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
        let engine = self.admission.engine.clone();
        let jobs = self.jobs.clone();
        let job = jobs.started(&req.caller, &collection_id).await;
        // The run outlives this call: its span, a child of the call's, carries the trace
        // into its model and tool calls.
        let span = tracing::info_span!(
            "agent.run",
            otel.name = "invoke_agent",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.request.model = %req.entry.name,
        );
        self.tracker.spawn(async move {
            let finished = engine.run(req, &control, &tx).instrument(span).await;
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
        let admitted = self
            .admission
            .admit(&caller, &r.model, &r.agent_args_json, r.has_collection)
            .await?;
        Ok(Response::new(admitted.accepted()))
    }

    async fn list_tools(&self, request: Request<Empty>) -> Result<Response<pb::ToolList>, Status> {
        let caller = caller(&request)?;
        let defaults = AgentType::General.default_tools();
        let custom = self.admission.custom_tools(&caller).await?;
        let tools = self
            .admission
            .engine
            .catalog
            .iter()
            .map(|t| pb::Tool {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                enabled: self.admission.enabled(t.name()),
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
        let custom = self.admission.custom_tools(&caller).await?;
        let unknown = self.admission.unknown_tools(&tools, &custom);
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
        if self.admission.custom_agents.is_some() {
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
        let dir = session_dir(&self.admission.workspaces, &id)?;
        let files = if workspaces::owned(&self.db, &id, &caller.user_id).await? {
            let session = id.clone();
            let local = blocking(move || files::list(&session, &dir)).await?;
            match &self.admission.engine.stored {
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
        let dir = session_dir(&self.admission.workspaces, &id)?;
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
        let root = session_dir(&self.admission.workspaces, &req.session_id)?;
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
        let (backend, load) = self.admission.engine.deps.code.load().unwrap_or_default();
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
        let root = self.admission.workspaces.clone();
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
