//! The agent loop: one turn = cost-cap check → stream the model (text out as deltas) →
//! tool calls? run them (bounded concurrency, per-call timeout, arguments validated against
//! the tool's schema; a failure is a tool result) → append → next. Budgets: agent_max_turns
//! (model calls), agent_total_timeout, agent_timeout per model call and per tool call.
//! Control: see [`control`].

pub mod admit;
pub mod agents;
pub mod args;
mod asker;
mod calls;
pub mod control;
mod custom;
mod history;
pub mod memory;
mod prompt;
pub mod schema;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use docchat_common::Caller;
use docchat_common::error::ErrorCode;
use docchat_inference::{
    ChatMessage, ChatModel, ModelEntry, Sampling, StreamEvent, ToolChoice, ToolSpec, Tools,
};
use docchat_proto::agent::v1 as pb;
use tokio::sync::mpsc;

use crate::budget::{Budget, usage_of};
use crate::stored::Stored;
use crate::tools::{Catalog, Extensions, ToolDeps};
use args::RunArgs;
use control::Control;
use history::History;

/// The stop reason of a run the user (or a caller that went away) stopped.
pub const STOPPED_BY_USER: &str = "stopped by the user";
/// How the stop reason of a run past agent_total_timeout begins. A run that runs out of
/// time (agent_total_timeout, or agent_timeout on a model call) fails with 504: its reply
/// keeps the text written so far and says why it ended (the stream's `error` line).
pub const TIME_BUDGET_RAN_OUT: &str = "the time budget ran out";

/// Concurrent tool calls of one turn.
const TOOL_CONCURRENCY: usize = 4;

/// What runs share on a replica.
#[derive(Clone)]
pub struct Engine {
    /// The built-in tools.
    pub catalog: Catalog,
    /// The callers' custom tools; `None` in tests without them.
    pub extensions: Option<Arc<dyn Extensions>>,
    /// The workspace's files as documents; `None` in tests without ingest-service.
    pub stored: Option<Arc<Stored>>,
    pub deps: Arc<ToolDeps>,
    pub budget: Arc<dyn Budget>,
}

/// One run, validated.
pub struct RunRequest {
    pub caller: Caller,
    pub start: pb::RunStart,
    pub args: RunArgs,
    /// The tools asked for: built-in names and custom tool names (opened per run).
    pub tools: Vec<String>,
    pub workspace: PathBuf,
    /// The caller's other workspaces and their disk total.
    pub disk: docchat_sandbox::UserDisk,
    pub model: Arc<ChatModel>,
    pub entry: ModelEntry,
    /// A custom agent of the caller's runs instead of the model loop (see [`custom`]).
    pub custom: Option<crate::custom_agents::run::CustomRun>,
}

/// How a run ended early.
struct End {
    reason: String,
    /// The HTTP status of a failure's cause; None when the run did not fail.
    failed: Option<ErrorCode>,
}

impl End {
    fn ok(reason: impl Into<String>) -> End {
        End {
            reason: reason.into(),
            failed: None,
        }
    }
    fn failed(reason: impl Into<String>, code: ErrorCode) -> End {
        End {
            reason: reason.into(),
            failed: Some(code),
        }
    }
    /// The model (or its upstream) failed.
    fn model(e: impl std::fmt::Display) -> End {
        End::failed(format!("the model failed: {e}"), ErrorCode::BadGateway)
    }
}

/// The run's state the steps share.
struct State<'a> {
    req: &'a RunRequest,
    control: &'a Control,
    events: &'a mpsc::Sender<pb::RunEvent>,
    deadline: tokio::time::Instant,
    started: Instant,
    text: String,
    ttft: Option<f64>,
    calls: Arc<Mutex<Vec<pb::ModelCall>>>,
    references: Vec<pb::Excerpt>,
    history: History,
    /// Files stored during this run (the last version of each path).
    files: Vec<pb::AgentFile>,
    /// The workspace was restored, so files missing from it were removed by the run.
    restored: bool,
    /// Files of the workspace that were not stored, and why (told in the reply at the end).
    unstored: Vec<String>,
    /// This run's tools: the built-in ones and the custom tools opened for it.
    catalog: Catalog,
    /// The names offered to the model.
    offered: Vec<String>,
}

impl State<'_> {
    /// Sends an event; a caller that went away stops the run.
    async fn emit(&self, event: pb::run_event::Event) {
        if self
            .events
            .send(pb::RunEvent { event: Some(event) })
            .await
            .is_err()
        {
            let _ = self.control.apply("stop");
        }
    }

    /// Ends the reply with the files that were not stored (past the agent document limit,
    /// too large, ...), so the user learns it from the answer, not only from the history.
    async fn tell_unstored(&mut self) {
        if self.unstored.is_empty() {
            return;
        }
        let sep = if self.text.is_empty() { "" } else { "\n\n" };
        let list: Vec<String> = self.unstored.iter().map(|n| format!("- {n}")).collect();
        self.delta(&format!(
            "{sep}Some files of this answer were not stored:\n{}",
            list.join("\n")
        ))
        .await;
    }

    async fn delta(&mut self, piece: &str) {
        if self.ttft.is_none() {
            self.ttft = Some(self.started.elapsed().as_secs_f64());
        }
        self.text.push_str(piece);
        self.emit(pb::run_event::Event::Delta(piece.to_owned()))
            .await;
    }
}

impl Engine {
    /// Runs `req` to its end; the result is what RunFinished carries (also when the run was
    /// stopped, ran out of budget or failed: `text` keeps what was said). Counted in the
    /// run metrics by how it ended.
    pub async fn run(
        &self,
        req: RunRequest,
        control: &Control,
        events: &mpsc::Sender<pb::RunEvent>,
    ) -> pb::RunFinished {
        let started = std::time::Instant::now();
        let finished = self.run_to_end(req, control, events).await;
        let outcome = if finished.failed {
            "failed"
        } else if finished.stop_reason.is_empty() {
            "ok"
        } else {
            "stopped"
        };
        crate::metrics::run_ended(outcome, started);
        finished
    }

    async fn run_to_end(
        &self,
        req: RunRequest,
        control: &Control,
        events: &mpsc::Sender<pb::RunEvent>,
    ) -> pb::RunFinished {
        if let Some(custom) = &req.custom {
            return self.run_custom(&req, custom, control, events).await;
        }
        let has_collection = !req.start.collection_id.is_empty();
        let rag = pb::RagKind::try_from(req.start.rag_kind).unwrap_or(pb::RagKind::None);
        let documents_at = self.documents_at(&req);
        let (catalog, offered, opened) = self.open_tools(&req, control).await;
        let memory = req.start.memory.as_ref();
        let mut instructions = opened.instructions.clone();
        instructions.extend(memory.and_then(memory::instructions));
        let mut messages = prompt::messages(
            req.args.agent_type,
            rag,
            &req.start,
            has_collection,
            documents_at.as_deref(),
            &instructions,
        );
        let prompt_raw = serde_json::to_string(&messages).unwrap_or_default();
        let specs: Vec<ToolSpec> = offered
            .iter()
            .filter_map(|n| catalog.get(n))
            .map(|t| ToolSpec {
                name: t.name().into(),
                description: t.description().into(),
                parameters: t.parameters(),
            })
            .collect();
        let mut st = State {
            req: &req,
            control,
            events,
            deadline: tokio::time::Instant::now() + req.args.total_timeout,
            started: Instant::now(),
            text: String::new(),
            ttft: None,
            calls: Arc::new(Mutex::new(Vec::new())),
            references: Vec::new(),
            history: History::default(),
            files: Vec::new(),
            restored: false,
            unstored: Vec::new(),
            catalog,
            offered,
        };
        for note in &opened.notes {
            st.history.note(0, note);
        }
        self.restore(&mut st).await;
        if let Some(m) = memory.filter(|m| memory::is_file_mode(m))
            && let Err(e) = memory::place(&req.workspace, m).await
        {
            st.history
                .note(0, &format!("the memory block's file was not written: {e}"));
        }
        let mut turns = 0u32;
        let mut tool_runs = 0usize;
        let end = loop {
            if control.stopped() {
                break End::ok(STOPPED_BY_USER);
            }
            tokio::select! {
                () = control.wait_while_paused() => {}
                () = tokio::time::sleep_until(st.deadline) => break End::failed(timeout_reason(&req.args), ErrorCode::GatewayTimeout),
            }
            if control.stopped() {
                break End::ok(STOPPED_BY_USER);
            }
            if turns >= req.args.max_turns {
                break End::ok(format!(
                    "the turn budget ran out (agent_max_turns = {})",
                    req.args.max_turns
                ));
            }
            let last = control.finishing();
            if let Err(e) = self.budget.check(&req.caller).await {
                break End::failed(e.message, e.code);
            }
            turns += 1;
            let tools = if specs.is_empty() {
                Tools::default()
            } else {
                Tools {
                    tools: specs.clone(),
                    choice: if last {
                        ToolChoice::None
                    } else {
                        ToolChoice::Auto
                    },
                    parallel: Some(true),
                }
            };
            let (turn_text, tool_calls) =
                match self.model_turn(&mut st, turns, &messages, &tools).await {
                    Ok(r) => r,
                    Err(end) => break end,
                };
            if tool_calls.is_empty() || last {
                if !tool_calls.is_empty() {
                    st.history
                        .note(turns, "tool calls after finish were not run");
                }
                break End::ok("");
            }
            messages.push(ChatMessage::assistant_calls(turn_text, tool_calls.clone()));
            if control.finishing() {
                for c in &tool_calls {
                    messages.push(ChatMessage::tool(
                        c.id.clone(),
                        "not run: the user asked to finish; answer now with what you have",
                    ));
                }
                continue;
            }
            tool_runs += tool_calls.len();
            let may_write = tool_calls
                .iter()
                .any(|c| st.catalog.get(&c.name).is_none_or(|t| t.writes()));
            match calls::run_all(self, &mut st, turns, tool_calls).await {
                Ok(results) => messages.extend(results),
                Err(end) => break end,
            }
            // A round of reads leaves the workspace as it was: no walk for it.
            if req.args.stream_files && may_write {
                self.store_files(&mut st, turns).await;
            }
        };
        self.store_files(&mut st, turns).await;
        st.tell_unstored().await;
        if let Some(m) = memory.filter(|m| memory::is_file_mode(m)) {
            self.save_memory(&mut st, turns, m).await;
        }
        let files_old = self.earlier_files(&mut st, turns).await;
        if !end.reason.is_empty() {
            st.history.note(turns, &end.reason);
        }
        let calls = st.calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let analysis = format!(
            "{turns} model call(s), {tool_runs} tool call(s){}",
            if end.reason.is_empty() {
                String::new()
            } else {
                format!("; ended: {}", end.reason)
            }
        );
        pb::RunFinished {
            text: st.text.clone(),
            stop_reason: end.reason,
            failed: end.failed.is_some(),
            status: end.failed.map_or(0, |c| u32::from(c.http_status())),
            files: std::mem::take(&mut st.files),
            files_old,
            history_json: st.history.json(),
            history_md: st.history.markdown(),
            analysis,
            prompt_raw,
            calls,
            references: std::mem::take(&mut st.references),
            turns,
            time_to_first_token: st.ttft.unwrap_or(0.0),
        }
    }

    /// The run's catalogue: the built-in tools asked for, and the custom ones opened (an MCP
    /// server gives one tool per tool it lists). What `opened` holds lives until the run
    /// ends.
    async fn open_tools(
        &self,
        req: &RunRequest,
        control: &Control,
    ) -> (Catalog, Vec<String>, crate::tools::Opened) {
        let (builtin, custom): (Vec<String>, Vec<String>) = req
            .tools
            .iter()
            .cloned()
            .partition(|n| self.catalog.get(n).is_some());
        let mut catalog = self.catalog.clone();
        let mut offered = builtin;
        let opened = match (&self.extensions, custom.is_empty()) {
            (Some(ext), false) => {
                let ctx = calls::tool_ctx(self, req, control.stop_token().child_token());
                ext.open(&req.caller, &custom, &ctx).await
            }
            _ => crate::tools::Opened::default(),
        };
        for tool in &opened.tools {
            offered.push(tool.name().to_owned());
            catalog = catalog.with(tool.clone());
        }
        // The memory tool of an agent_tool block (it takes the name from a custom tool).
        if let Some(m) = req
            .start
            .memory
            .as_ref()
            .filter(|m| memory::is_tool_mode(m))
        {
            let tool = crate::tools::memory::MemoryTool::new(m.clone());
            offered.retain(|n| n != crate::tools::memory::NAME);
            offered.push(crate::tools::memory::NAME.to_owned());
            catalog = catalog.with(Arc::new(tool));
        }
        (catalog, offered, opened)
    }

    /// Saves the agent_file block back from its file; a change that could not be kept is
    /// said in the answer and the history.
    async fn save_memory(&self, st: &mut State<'_>, turn: u32, m: &pb::RunMemory) {
        let req = st.req;
        let outcome =
            memory::save_back(self.deps.clients.as_ref(), &req.caller, &req.workspace, m).await;
        if let Some(note) = outcome.note(m) {
            st.history.note(turn, &note);
        }
        if let Some(notice) = outcome.notice(m) {
            let sep = if st.text.is_empty() { "" } else { "\n\n" };
            st.delta(&format!("{sep}{notice}")).await;
        }
    }

    /// Where the run's code sees the collection's documents: only with a collection, a
    /// shelf and a code tool offered.
    fn documents_at(&self, req: &RunRequest) -> Option<String> {
        let shelf = self.deps.shelf.as_ref()?;
        let code = req.tools.iter().any(|t| t == "python" || t == "shell");
        if req.start.collection_id.is_empty() || !code {
            return None;
        }
        let host = shelf.path(&req.start.collection_id);
        Some(self.deps.code.documents_at(&host).display().to_string())
    }

    /// Brings the session's workspace up to its stored files before the first turn.
    async fn restore(&self, st: &mut State<'_>) {
        let Some(stored) = &self.stored else { return };
        let req = st.req;
        match stored
            .restore(&req.caller, &req.start.session_id, &req.workspace)
            .await
        {
            Ok(notes) => {
                st.restored = true;
                for n in notes {
                    st.history.note(0, &n);
                }
            }
            Err(e) => {
                tracing::warn!(session = %req.start.session_id, error = %e.message, "workspace not restored");
                st.history.note(
                    0,
                    &format!(
                        "the workspace's stored files were not restored: {}",
                        e.message
                    ),
                );
            }
        }
    }

    /// Stores the workspace's new and changed files as documents; each is announced in the
    /// stream as it is stored (agent_stream_files) and is one of the run's files.
    async fn store_files(&self, st: &mut State<'_>, turn: u32) {
        let Some(stored) = &self.stored else { return };
        let req = st.req;
        let synced = stored
            .sync(
                &req.caller,
                &req.start.session_id,
                &req.start.question_id,
                &req.workspace,
                st.restored,
            )
            .await;
        match synced {
            Ok(synced) => {
                for n in synced.notes {
                    st.history.note(turn, &n);
                    if !st.unstored.contains(&n) {
                        st.unstored.push(n);
                    }
                }
                for f in synced.files {
                    if req.args.stream_files {
                        st.emit(pb::run_event::Event::File(f.clone())).await;
                        let sep = if st.text.is_empty() { "" } else { "\n\n" };
                        st.delta(&format!("{sep}{}", file_link(&f))).await;
                    }
                    st.files.retain(|g| g.name != f.name);
                    st.files.push(f);
                }
            }
            Err(e) => {
                tracing::warn!(session = %req.start.session_id, error = %e.message, "workspace files not stored");
                st.history
                    .note(turn, &format!("files were not stored: {}", e.message));
            }
        }
    }

    /// The session's files from earlier turns (not changed by this one).
    async fn earlier_files(&self, st: &mut State<'_>, turn: u32) -> Vec<pb::AgentFile> {
        let Some(stored) = &self.stored else {
            return Vec::new();
        };
        match stored
            .earlier(&st.req.start.session_id, &st.req.start.question_id)
            .await
        {
            Ok(files) => files,
            Err(e) => {
                st.history
                    .note(turn, &format!("earlier files unknown: {}", e.message));
                Vec::new()
            }
        }
    }

    /// One model call: streams its text out, books it, answers its text and tool calls.
    async fn model_turn(
        &self,
        st: &mut State<'_>,
        turn: u32,
        messages: &[ChatMessage],
        tools: &Tools,
    ) -> Result<(String, Vec<docchat_inference::ToolCall>), End> {
        let req = st.req;
        let turn_deadline = st
            .deadline
            .min(tokio::time::Instant::now() + req.args.turn_timeout);
        let sampling = Sampling {
            max_tokens: (req.start.max_new_tokens > 0).then_some(req.start.max_new_tokens),
            temperature: Some(req.start.temperature as f32),
        };
        let stop = st.control.stop_token().clone();
        let mut stream = tokio::select! {
            r = req.model.stream_tools(messages, sampling, tools) => r.map_err(End::model)?,
            () = stop.cancelled() => return Err(End::ok(STOPPED_BY_USER)),
            () = tokio::time::sleep_until(turn_deadline) => return Err(End::failed(turn_timeout_reason(st), ErrorCode::GatewayTimeout)),
        };
        let mut turn_text = String::new();
        let mut separated = st.text.is_empty();
        let outcome: Result<(), End> = loop {
            tokio::select! {
                ev = stream.next() => match ev {
                    None => break Ok(()),
                    Some(Ok(StreamEvent::Delta(d))) => {
                        if !separated {
                            st.delta("\n\n").await;
                            separated = true;
                        }
                        turn_text.push_str(&d);
                        st.delta(&d).await;
                    }
                    Some(Err(e)) => break Err(End::model(e)),
                },
                () = stop.cancelled() => break Err(End::ok(STOPPED_BY_USER)),
                () = tokio::time::sleep_until(turn_deadline) => break Err(End::failed(turn_timeout_reason(st), ErrorCode::GatewayTimeout)),
            }
        };
        let usage = usage_of(
            &req.caller,
            &req.entry,
            "agent",
            &req.start.question_id,
            stream.usage(),
        );
        asker::record(&st.calls, &usage);
        self.budget.book(usage).await;
        outcome?;
        let calls = stream.take_tool_calls().map_err(End::model)?;
        st.history.model(turn, &turn_text, &calls, stream.usage());
        Ok((turn_text, calls))
    }
}

/// A Markdown link to a stored file: its download route (`/file`, SPEC.md) beside the API.
fn file_link(f: &pb::AgentFile) -> String {
    let label: String = f
        .name
        .chars()
        .flat_map(|c| match c {
            '[' | ']' | '\\' => vec!['\\', c],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect();
    let base = f.name.rsplit('/').next().unwrap_or(&f.name);
    format!(
        "[{label}](/file?id={}&name={})",
        percent_encode(&f.document_id),
        percent_encode(base)
    )
}

/// `s` with every byte but RFC 3986's unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn timeout_reason(args: &RunArgs) -> String {
    format!(
        "{TIME_BUDGET_RAN_OUT} (agent_total_timeout = {} s)",
        args.total_timeout.as_secs()
    )
}

fn turn_timeout_reason(st: &State<'_>) -> String {
    if tokio::time::Instant::now() >= st.deadline {
        timeout_reason(&st.req.args)
    } else {
        format!(
            "the model took longer than agent_timeout ({} s)",
            st.req.args.turn_timeout.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_links_are_encoded() {
        let f = pb::AgentFile {
            document_id: "d-1".into(),
            name: "charts/sales [q1] & more.png".into(),
            size: 1,
        };
        assert_eq!(
            file_link(&f),
            "[charts/sales \\[q1\\] & more.png](/file?id=d-1&name=sales%20%5Bq1%5D%20%26%20more.png)"
        );
    }
}
