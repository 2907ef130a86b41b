//! Completions: a question in, a reply out, streamed as it is generated.
//!
//! The question is stored (and its control registered) before anything is generated, so
//! its id can be paused, stopped or finished at once. Generation runs in a task on the
//! service's tracker: a client that goes away does not lose the reply, which is stored
//! with its references, metadata (`usage_stats`, `prompt_raw`) and a `usage.llm` event in
//! one transaction; the service's shutdown stops it and stores what it has.
//!
//! - [`request`]: validating a request into a [`Job`] (through the [`ModelGate`]), storing
//!   its question;
//! - [`generate`]: the generation loop (control, shutdown, the client) and how it ends;
//! - [`retrieval`]: the excerpts an answer reads (search, HyDE drafts, neighbours, every
//!   chunk) and their recursive summarization;
//! - [`prompt`]: the messages sent to the model, fitted to its context;
//! - [`store`]: the question's and the reply's transactions, each one batch;
//! - [`agent`]: agent completions, answered by agent-service's runs.

mod agent;
mod generate;
mod memory;
mod prompt;
mod request;
mod retrieval;
mod scope;
mod store;

use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_common::error::ApiResult;
use docchat_common::outbox::OutboxRelay;
use docchat_inference::ChatModel;
use docchat_proto::chat::v1 as pb;
use sea_orm::DatabaseConnection;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Status;
use tracing::Instrument;

pub use request::{DEFAULT_MAX_NEW_TOKENS, RagMode};
pub use store::{Spent, UsageLog, message_id};

use crate::control::{Controls, Kind};
use crate::entities::{chat_sessions, messages};
use crate::fairness::Priority;
use crate::gate::ModelGate;

/// Events buffered towards the client. Small, so a pause holds back little.
const EVENT_BUFFER: usize = 4;

/// Validated llm_args and options of one request.
struct Job {
    /// Where the generation queues for a slot, when chat fairness is on.
    priority: Option<Priority>,
    caller: Caller,
    session: chat_sessions::Model,
    question: messages::Model,
    model_name: String,
    model: Arc<ChatModel>,
    context_length: u64,
    prices: (f64, f64),
    mode: RagMode,
    /// The session's messages before the question, oldest first (empty without history).
    history: Vec<messages::Model>,
    temperature: f32,
    max_new_tokens: u32,
    /// Set when agent-service answers (the mode is [`RagMode::Agent`]).
    agent: Option<agent::AgentPlan>,
    /// The memory block injected into a plain or RAG prompt (see [`memory`]).
    memory: Option<memory::Memory>,
    /// The caller's own instructions for this completion (`CompletionRequest.system_prompt`).
    system_prompt: Option<String>,
    /// Searches use the reranker when one is configured (rag_config.rerank, default on).
    rerank: bool,
    /// What stands before the excerpts instead of docchat's instructions (pre_prompt_query).
    pre_prompt_query: Option<String>,
    /// Put before the question in the prompt (prompt_query).
    prompt_query: Option<String>,
    /// Which documents RAG reads (the client's tags or document ids).
    scope: scope::Scope,
}

type Events = mpsc::Sender<Result<pb::CompletionEvent, Status>>;

/// Everything a completion needs; cheap to clone into its task.
#[derive(Clone)]
pub struct Completer {
    pub db: DatabaseConnection,
    pub gate: ModelGate,
    /// ingest-service (search, chunks) on behalf of the asking user.
    pub clients: Clients,
    pub relay: OutboxRelay,
    pub controls: Controls,
    /// Where generations run: the service's tracker, which shutdown waits for before the
    /// database closes.
    pub tasks: TaskTracker,
    /// The service's shutdown: a generation stops and stores what it has.
    pub shutdown: CancellationToken,
    /// How long a generation's claim holds without renewal (`chat_completion_lease_seconds`).
    pub lease: std::time::Duration,
    /// The longest a reply stays paused (`chat_max_pause_seconds`): then it is stopped.
    pub max_pause: std::time::Duration,
    /// RAG questions the collection comes less close to are answered "not in the documents"
    /// (`rag_min_similarity`; 0: never).
    pub min_similarity: f64,
}

impl Completer {
    /// Validates, stores the question, and starts generating. The receiver yields the
    /// question id first, then deltas, then `done` or `error`, numbered from 1 (`seq`).
    pub async fn start(
        &self,
        caller: &Caller,
        request: pb::CompletionRequest,
    ) -> ApiResult<mpsc::Receiver<Result<pb::CompletionEvent, Status>>> {
        let priority = self.gate.count(caller).await?;
        let job = self.prepare(caller, request, priority).await?;
        let (control, registration) = self.controls.register(&job.question.id, Kind::Completion);
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let _ = tx
            .send(Ok(event(
                pb::completion_event::Event::QuestionId(job.question.id.clone()),
                1,
            )))
            .await;
        // The generation outlives the call that started it: its span, a child of the call's,
        // carries the trace into retrieval, the model and the agent.
        let span = tracing::info_span!(
            "completion",
            rag_type = job.mode.name(),
            gen_ai.request.model = %job.model_name,
            question_id = %job.question.id,
        );
        self.tasks.spawn(
            self.clone()
                .generate(job, tx, control, registration)
                .instrument(span),
        );
        Ok(rx)
    }
}

/// A streamed completion's line `seq` (marks.rs: 1 is the question's id).
pub(crate) fn event(e: pb::completion_event::Event, seq: u64) -> pb::CompletionEvent {
    pb::CompletionEvent {
        event: Some(e),
        seq,
    }
}
