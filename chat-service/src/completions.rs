//! Completions: a question in, a reply out, streamed as it is generated.
//!
//! The question is stored (and its control registered) before anything is generated, so
//! its id can be paused, stopped or finished at once. Generation runs in its own task: a
//! client that goes away does not lose the reply, which is stored with its references,
//! metadata (`usage_stats`, `prompt_raw`) and a `usage.llm` event in one transaction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use docchat_common::auth::authorized;
use docchat_common::budget::CostGuard;
use docchat_common::config::Service;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::settings::SettingsClient;
use docchat_common::time::now;
use docchat_common::{Caller, JwtKeys};
use docchat_inference::{
    ChatError, ChatMessage, ChatModel, Completion, LocalOptions, ModelEntry, Registry, StreamEvent,
};
use docchat_proto::chat::v1 as pb;
use docchat_proto::events::v1::LlmUsage;
use docchat_proto::ingest::v1::ingest_service_client::IngestServiceClient;
use docchat_proto::ingest::v1::{ListChunksRequest, SearchHit, SearchRequest};
use futures::StreamExt;
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Set, TransactionTrait,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Status;
use tonic::transport::Channel;

use crate::batch::{Batch, TAG, tag, tagged};
use crate::control::{Controls, Registration, State};
use crate::entities::{chat_sessions, message_meta, message_references, messages};
use crate::events::usage_event;
use crate::fairness::{Fairness, Priority};
use crate::limits;

/// SPEC.md's default of llm_args.max_new_tokens.
pub const DEFAULT_MAX_NEW_TOKENS: u32 = 1536;
/// Excerpts retrieved for an answer.
const TOP_K: u32 = 8;
/// Longest question accepted, in characters.
const MAX_QUESTION_CHARS: usize = 200_000;
/// Earlier messages considered for the conversation history.
const HISTORY_MESSAGES: u64 = 20;
/// After `finish`, the reply ends at the next sentence end, or after this many bytes.
const FINISH_GRACE_BYTES: usize = 400;
/// Events buffered towards the client. Small, so a pause holds back little.
const EVENT_BUFFER: usize = 4;
/// The error of a reply cut short by the service's shutdown.
const INTERRUPTED: &str = "the reply was interrupted: chat-service shut down";

const SYSTEM_PROMPT: &str =
    "You are docchat, a helpful assistant. Answer accurately and concisely.";
const RAG_INSTRUCTIONS: &str = "Answer the question using the numbered document excerpts below. Cite the excerpts you use by their number in brackets, like [1]. If the excerpts do not contain the answer, say so.";
const NOTES_INSTRUCTIONS: &str = "Answer the question using the notes below, summarized from the documents of this chat. If the notes do not contain the answer, say so.";
const SUMMARY_PROMPT: &str = "Summarize the document excerpts below, keeping every fact, number and name that could help answer the question. Say which document each fact comes from. Write only the summary.";
/// Chunks either side of each retrieved one in rag+ answers.
const NEIGHBOURS: u32 = 1;
/// Most chunks an all_data answer reads.
const MAX_ALL_DATA_CHUNKS: u32 = 2000;
/// Tokens of one summary in the recursive summarization.
const SUMMARY_TOKENS: u32 = 512;
const MAX_SUMMARY_ROUNDS: usize = 4;
/// Summary calls in flight at once.
const SUMMARY_CONCURRENCY: usize = 4;
const HYDE_PROMPT: &str = "Write a short passage that answers the question, as a document on the subject would. It is used to search documents, so be specific.";

/// The chat models of the registry, each ready to call (or why it is not).
pub struct Models {
    by_name: HashMap<String, Result<Arc<ChatModel>, String>>,
}

impl Models {
    pub fn new(registry: &Registry, local: &LocalOptions) -> Models {
        let by_name = registry
            .chat_models()
            .map(|entry| {
                let model = ChatModel::from_entry(entry, local)
                    .map(Arc::new)
                    .map_err(|e| e.to_string());
                if let Err(e) = &model {
                    tracing::warn!(model = %entry.name, error = %e, "chat model unusable");
                }
                (entry.name.clone(), model)
            })
            .collect();
        Models { by_name }
    }

    pub fn get(&self, name: &str) -> ApiResult<Arc<ChatModel>> {
        match self.by_name.get(name) {
            Some(Ok(model)) => Ok(model.clone()),
            Some(Err(why)) => Err(ApiError::new(
                ErrorCode::Unavailable,
                format!("model {name} is not usable: {why}"),
            )),
            None => Err(ApiError::bad_request(format!("model {name} not found"))),
        }
    }
}

/// How the answer uses the session's collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RagMode {
    LlmOnly,
    Rag,
    /// An LLM-only draft answer becomes the retrieval query.
    Hyde1,
    /// As Hyde1, then a second draft written from the first retrieval is the query.
    Hyde2,
    /// The retrieved chunks with their neighbours, in document order; summarized
    /// recursively when they do not fit the context.
    RagPlus,
    /// Every chunk of the collection, summarized recursively to fit.
    AllData,
}

impl RagMode {
    /// SPEC.md's rag_type rules: RAG types need a collection; agent_only without use_agent
    /// falls back to rag (or to llm_only where there is no collection, as `auto` does); the
    /// agentic types answer a clear error until agents exist.
    pub fn choose(rag_type: &str, use_agent: bool, has_collection: bool) -> ApiResult<RagMode> {
        let auto = if has_collection {
            RagMode::Rag
        } else {
            RagMode::LlmOnly
        };
        let needs_collection = |mode: RagMode| {
            if has_collection {
                Ok(mode)
            } else {
                Err(ApiError::bad_request(format!(
                    "rag_type {rag_type} needs a chat session with a collection; this session has none (use llm_only)"
                )))
            }
        };
        if use_agent {
            return Err(agent_unavailable("use_agent"));
        }
        match rag_type {
            "" | "auto" | "agent_only" => Ok(auto),
            "llm_only" => Ok(RagMode::LlmOnly),
            "rag" => needs_collection(RagMode::Rag),
            "hyde1" => needs_collection(RagMode::Hyde1),
            "hyde2" => needs_collection(RagMode::Hyde2),
            "agentic_rag" | "fast_agentic_rag" | "rlm_rag" => {
                Err(agent_unavailable(&format!("rag_type {rag_type}")))
            }
            "rag+" => needs_collection(RagMode::RagPlus),
            "all_data" => needs_collection(RagMode::AllData),
            other => Err(ApiError::bad_request(format!(
                "unknown rag_type {other}: use auto, llm_only, agent_only, rag, agentic_rag, rlm_rag, fast_agentic_rag, hyde1, hyde2, rag+ or all_data"
            ))),
        }
    }
}

fn agent_unavailable(what: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{what} runs the agent, which this server does not offer yet; use rag or llm_only"
    ))
}

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
}

type Events = mpsc::Sender<Result<pb::CompletionEvent, Status>>;

/// Everything a completion needs; cheap to clone into its task.
#[derive(Clone)]
pub struct Completer {
    pub db: DatabaseConnection,
    pub registry: Arc<Registry>,
    pub models: Arc<Models>,
    pub ingest: IngestServiceClient<Channel>,
    pub keys: Arc<JwtKeys>,
    pub relay: OutboxRelay,
    pub controls: Controls,
    pub settings: SettingsClient,
    pub costs: CostGuard,
    /// Rate limit and priority queues, when chat fairness is on.
    pub fairness: Option<Fairness>,
    /// Where generations run: the service's tracker, which shutdown waits for before the
    /// database closes.
    pub tasks: TaskTracker,
    /// The service's shutdown: a generation stops and stores what it has.
    pub shutdown: CancellationToken,
}

impl Completer {
    /// Validates, stores the question, and starts generating. The receiver yields the
    /// question id first, then deltas, then `done` or `error`.
    pub async fn start(
        &self,
        caller: &Caller,
        request: pb::CompletionRequest,
    ) -> ApiResult<mpsc::Receiver<Result<pb::CompletionEvent, Status>>> {
        let priority = match &self.fairness {
            Some(fairness) => Some(fairness.admit(&caller.user_id)?),
            None => None,
        };
        let job = self.prepare(caller, request, priority).await?;
        let (control, registration) = self.controls.register(&job.question.id);
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let _ = tx
            .send(Ok(event(pb::completion_event::Event::QuestionId(
                job.question.id.clone(),
            ))))
            .await;
        self.tasks
            .spawn(self.clone().generate(job, tx, control, registration));
        Ok(rx)
    }

    /// Refuses (429) when `caller` has reached a cost cap.
    pub async fn check_budget(&self, caller: &Caller) -> ApiResult<()> {
        let settings = self.settings.resolve(caller).await?;
        self.costs.check(caller, &settings).await
    }

    /// Books one model call made outside a reply (suggested questions): a `usage.llm` event.
    pub async fn book(
        &self,
        caller: &Caller,
        entry: &ModelEntry,
        purpose: &str,
        done: &Completion,
        message_id: &str,
    ) -> ApiResult<()> {
        let usage = LlmUsage {
            user_id: caller.user_id.clone(),
            model: entry.name.clone(),
            prompt_tokens: done.prompt_tokens,
            completion_tokens: done.completion_tokens,
            cost: cost(
                (entry.input_price, entry.output_price),
                done.prompt_tokens,
                done.completion_tokens,
            ),
            purpose: purpose.to_owned(),
            message_id: message_id.to_owned(),
            calls: 1,
        };
        outbox::enqueue(&self.db, &usage_event(&usage)).await?;
        self.relay.notify();
        Ok(())
    }

    async fn prepare(
        &self,
        caller: &Caller,
        r: pb::CompletionRequest,
        priority: Option<Priority>,
    ) -> ApiResult<Job> {
        let message = r.message.trim();
        if message.is_empty() {
            return Err(ApiError::bad_request("message must not be empty"));
        }
        if message.chars().count() > MAX_QUESTION_CHARS {
            return Err(ApiError::bad_request(format!(
                "message is longer than {MAX_QUESTION_CHARS} characters"
            )));
        }
        let history = match r.include_chat_history.as_str() {
            "" | "on" | "true" | "auto" => true,
            "off" | "false" => false,
            other => {
                return Err(ApiError::bad_request(format!(
                    "include_chat_history must be on, off, true, false or auto, not {other}"
                )));
            }
        };
        let temperature = r.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::bad_request(
                "llm_args.temperature must be between 0 and 2",
            ));
        }
        let max_new_tokens = r.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS);
        if max_new_tokens == 0 {
            return Err(ApiError::bad_request(
                "llm_args.max_new_tokens must be at least 1",
            ));
        }
        if let Some(id) = r.memory_block_id.as_deref().filter(|s| !s.is_empty()) {
            if uuid::Uuid::parse_str(id).is_err() {
                return Err(ApiError::bad_request(format!(
                    "llm_args.memory_block_id {id} is not a UUID"
                )));
            }
            return Err(ApiError::not_found(format!("memory block {id} not found")));
        }
        if let Some(name) = r.memory_block_name.as_deref().filter(|s| !s.is_empty()) {
            return Err(ApiError::not_found(format!(
                "memory block {name} not found"
            )));
        }
        // What needs no session is looked up first; its errors wait for the session's, so
        // a request answers as it did when the session was read first.
        let model = self.registry.resolve(&r.llm).ok_or_else(|| {
            if r.llm.is_empty() || r.llm == "auto" {
                ApiError::new(ErrorCode::Unavailable, "no chat model is configured")
            } else {
                ApiError::bad_request(format!(
                    "model {} not found; GET /api/v1/models lists the models",
                    r.llm
                ))
            }
        });
        let settings = self.settings.resolve(caller).await?;
        let budget = self.costs.check(caller, &settings).await;
        let cap = settings.limit("chat_max_concurrent_per_user");
        let asked = Question {
            session_id: &r.session_id,
            content: message,
            history,
            concurrency_cap: cap,
        };
        let (stored, (mode, entry, model)) = store_question(&self.db, caller, asked, |session| {
            let mode = RagMode::choose(&r.rag_type, r.use_agent, session.collection_id.is_some())?;
            let entry = model?;
            let model = self.models.get(&entry.name)?;
            budget?;
            Ok((mode, entry, model))
        })
        .await?;
        let Stored {
            session,
            question,
            history,
        } = stored;
        let max_new_tokens =
            max_new_tokens.min(entry.context_length.try_into().unwrap_or(u32::MAX));
        Ok(Job {
            priority,
            caller: caller.clone(),
            session,
            question,
            model_name: entry.name.clone(),
            model,
            context_length: entry.context_length,
            prices: (entry.input_price, entry.output_price),
            mode,
            history,
            temperature: temperature as f32,
            max_new_tokens,
        })
    }

    async fn generate(
        self,
        job: Job,
        tx: Events,
        mut control: watch::Receiver<State>,
        _registration: Registration,
    ) {
        let started = Instant::now();
        let mut usage = UsageLog::default();
        let _slot = match (&self.fairness, job.priority) {
            (Some(fairness), Some(priority)) => {
                tokio::select! {
                    permit = fairness.acquire(priority) => Some(permit),
                    _ = async { control.wait_for(|s| *s == State::Stopped).await.is_ok() } => {
                        // Stopped while queued: nothing was generated.
                        self.finish(&job, Reply::default(), usage, started, &tx).await;
                        return;
                    }
                    () = self.shutdown.cancelled() => {
                        let reply = Reply { error: Some(INTERRUPTED.to_owned()), ..Reply::default() };
                        self.finish(&job, reply, usage, started, &tx).await;
                        return;
                    }
                }
            }
            _ => None,
        };
        let prompt = tokio::select! {
            prompt = self.prompt(&job, &mut usage) => prompt,
            () = self.shutdown.cancelled() => Err(ApiError::new(ErrorCode::Unavailable, INTERRUPTED)),
        };
        let prompt = match prompt {
            Ok(p) => p,
            Err(e) => {
                let reply = Reply {
                    text: String::new(),
                    error: Some(e.message.clone()),
                    ..Reply::default()
                };
                self.finish(&job, reply, usage, started, &tx).await;
                return;
            }
        };
        let Prompt { messages, hits } = prompt;
        let mut reply = Reply {
            references: hits,
            prompt_raw: serde_json::to_string_pretty(&messages).unwrap_or_default(),
            ..Reply::default()
        };
        let mut stream = match job
            .model
            .stream(&messages, job.max_new_tokens, job.temperature)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                reply.error = Some(e.to_string());
                self.finish(&job, reply, usage, started, &tx).await;
                return;
            }
        };
        let mut finishing_from: Option<usize> = None;
        let mut client = Some(tx.clone());
        loop {
            let state = *control.borrow_and_update();
            match state {
                State::Stopped => break,
                State::Paused => {
                    // Hold: read nothing from the model until the state changes.
                    tokio::select! {
                        changed = control.changed() => if changed.is_err() { break },
                        () = self.shutdown.cancelled() => {
                            reply.error = Some(INTERRUPTED.to_owned());
                            break;
                        }
                    }
                    continue;
                }
                State::Finishing if finishing_from.is_none() => {
                    finishing_from = Some(reply.text.len());
                }
                _ => {}
            }
            let next = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => {
                    reply.error = Some(INTERRUPTED.to_owned());
                    break;
                }
                changed = control.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => {
                    reply.error = Some(e.to_string());
                    break;
                }
                Some(Ok(StreamEvent::Delta(text))) => {
                    if reply.first_token.is_none() {
                        reply.first_token = Some(started.elapsed().as_secs_f64());
                    }
                    reply.text.push_str(&text);
                    if let Some(sender) = &client
                        && sender
                            .send(Ok(event(pb::completion_event::Event::Delta(text))))
                            .await
                            .is_err()
                    {
                        // The client went away: the reply is still finished and stored.
                        client = None;
                    }
                    if let Some(from) = finishing_from
                        && (ends_thought(&reply.text)
                            || reply.text.len() - from > FINISH_GRACE_BYTES)
                    {
                        break;
                    }
                }
            }
        }
        let (prompt_tokens, completion_tokens) = stream.usage();
        // Dropping the stream closes the upstream connection (stop and finish cancel there).
        drop(stream);
        usage.add(&job, "chat", prompt_tokens, completion_tokens);
        self.finish(&job, reply, usage, started, &tx).await;
    }

    /// The messages sent to the model, with the excerpts they cite.
    async fn prompt(&self, job: &Job, usage: &mut UsageLog) -> ApiResult<Prompt> {
        let question = job.question.content.as_str();
        let (hits, notes) = match job.mode {
            RagMode::LlmOnly => (Vec::new(), None),
            RagMode::Rag => (self.search(job, question).await?, None),
            RagMode::Hyde1 | RagMode::Hyde2 => {
                let draft = self.draft(job, question, &[], usage).await?;
                let mut hits = self.search(job, &format!("{question}\n{draft}")).await?;
                if job.mode == RagMode::Hyde2 {
                    let draft = self.draft(job, question, &hits, usage).await?;
                    hits = self.search(job, &format!("{question}\n{draft}")).await?;
                }
                (hits, None)
            }
            RagMode::RagPlus => {
                let found = self.search(job, question).await?;
                let ids: Vec<i64> = found.iter().map(|h| h.chunk_id).collect();
                let mut chunks = self.chunks(job, ids, NEIGHBOURS).await?;
                for c in &mut chunks {
                    c.score = found
                        .iter()
                        .find(|h| h.chunk_id == c.chunk_id)
                        .map_or(0.0, |h| h.score);
                }
                self.fit(job, question, chunks, usage).await?
            }
            RagMode::AllData => {
                let chunks = self.chunks(job, Vec::new(), 0).await?;
                self.fit(job, question, chunks, usage).await?
            }
        };
        Ok(build_prompt(
            question,
            &job.history,
            hits,
            notes.as_deref(),
            job.context_length,
            job.max_new_tokens,
        ))
    }

    /// Chunks of the session's collection in document order: around `ids` (with
    /// `neighbours` either side), or all of them when `ids` is empty.
    async fn chunks(&self, job: &Job, ids: Vec<i64>, neighbours: u32) -> ApiResult<Vec<SearchHit>> {
        let Some(collection_id) = job.session.collection_id.clone() else {
            return Ok(Vec::new());
        };
        if ids.is_empty() && neighbours > 0 {
            return Ok(Vec::new());
        }
        let request = authorized(
            &self.keys,
            &job.caller,
            Service::Ingest,
            ListChunksRequest {
                collection_id,
                around: ids,
                neighbours,
                offset: 0,
                limit: MAX_ALL_DATA_CHUNKS,
            },
        )?;
        let list = self
            .ingest
            .clone()
            .list_chunks(request)
            .await
            .map_err(|s| ApiError::from_status(&s))?
            .into_inner();
        if list.more {
            tracing::warn!(question = %job.question.id, "the collection has more than {MAX_ALL_DATA_CHUNKS} chunks; the answer reads the first ones");
        }
        Ok(list.chunks)
    }

    /// The chunks as they are when they fit the prompt; otherwise summarized recursively
    /// (groups that fit one model call, each summarized for the question, then the
    /// summaries grouped again) into notes that fit. The chunks stay the references.
    async fn fit(
        &self,
        job: &Job,
        question: &str,
        chunks: Vec<SearchHit>,
        usage: &mut UsageLog,
    ) -> ApiResult<(Vec<SearchHit>, Option<String>)> {
        let budget = context_budget(question, job.context_length, job.max_new_tokens) / 2;
        if excerpts(&chunks).len() <= budget {
            return Ok((chunks, None));
        }
        // One summary call reads at most this many characters.
        let per_call = (context_budget(question, job.context_length, SUMMARY_TOKENS) / 2).max(500);
        let mut pieces: Vec<String> = chunks.iter().map(excerpt_text).collect();
        for _round in 0..MAX_SUMMARY_ROUNDS {
            let total: usize = pieces.iter().map(|p| p.len() + 2).sum();
            if total <= budget {
                break;
            }
            let groups = group(&pieces, per_call);
            let calls = futures::stream::iter(groups.into_iter().map(|text| {
                let messages = vec![
                    ChatMessage::system(format!("{SUMMARY_PROMPT}\n\nQuestion: {question}")),
                    ChatMessage::user(text),
                ];
                let model = job.model.clone();
                async move { model.complete(&messages, SUMMARY_TOKENS, 0.0).await }
            }))
            .buffered(SUMMARY_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
            let mut next = Vec::with_capacity(calls.len());
            for done in calls {
                let done = done.map_err(model_error)?;
                usage.add(job, "summary", done.prompt_tokens, done.completion_tokens);
                next.push(done.text.trim().to_owned());
            }
            if next.iter().map(String::len).sum::<usize>() >= total {
                // Summaries no shorter than their input: stop rather than loop.
                pieces = next;
                break;
            }
            pieces = next;
        }
        let mut notes = pieces.join("\n\n");
        if notes.len() > budget {
            let cut = (0..=budget)
                .rev()
                .find(|i| notes.is_char_boundary(*i))
                .unwrap_or(0);
            notes.truncate(cut);
        }
        Ok((chunks, Some(notes)))
    }

    /// A HyDE draft: what an answer might say, to search with.
    async fn draft(
        &self,
        job: &Job,
        question: &str,
        hits: &[SearchHit],
        usage: &mut UsageLog,
    ) -> ApiResult<String> {
        let mut messages = vec![ChatMessage::system(HYDE_PROMPT)];
        if !hits.is_empty() {
            messages.push(ChatMessage::system(excerpts(hits)));
        }
        messages.push(ChatMessage::user(question));
        let done = job
            .model
            .complete(&messages, 256.min(job.max_new_tokens), 0.0)
            .await
            .map_err(model_error)?;
        usage.add(job, "hyde", done.prompt_tokens, done.completion_tokens);
        Ok(done.text)
    }

    async fn search(&self, job: &Job, query: &str) -> ApiResult<Vec<SearchHit>> {
        let Some(collection_id) = job.session.collection_id.clone() else {
            return Ok(Vec::new());
        };
        let request = authorized(
            &self.keys,
            &job.caller,
            Service::Ingest,
            SearchRequest {
                collection_ids: vec![collection_id],
                document_ids: vec![],
                query: query.chars().take(10_000).collect(),
                top_k: TOP_K,
            },
        )?;
        Ok(self
            .ingest
            .clone()
            .search(request)
            .await
            .map_err(|s| ApiError::from_status(&s))?
            .into_inner()
            .hits)
    }

    /// Stores the reply and tells the client how it ended.
    async fn finish(
        &self,
        job: &Job,
        reply: Reply,
        usage: UsageLog,
        started: Instant,
        tx: &Events,
    ) {
        let elapsed = started.elapsed().as_secs_f64();
        let last = match store_reply(&self.db, job, &reply, &usage, elapsed).await {
            Ok(stored) => {
                self.relay.notify();
                match (stored, reply.error) {
                    (None, _) => pb::completion_event::Event::Error(pb::CompletionError {
                        message: format!(
                            "the reply could not be stored: chat session {} was deleted",
                            job.session.id
                        ),
                        message_id: None,
                    }),
                    (Some(reply_id), Some(message)) => {
                        pb::completion_event::Event::Error(pb::CompletionError {
                            message,
                            message_id: Some(reply_id),
                        })
                    }
                    (Some(reply_id), None) => {
                        pb::completion_event::Event::Done(pb::CompletionDone {
                            message_id: reply_id,
                            body: reply.text,
                        })
                    }
                }
            }
            Err(e) => {
                tracing::error!(question = %job.question.id, error = %e, "storing a reply failed");
                if let Err(e) = limits::release(&self.db, &job.question.id).await {
                    tracing::warn!(question = %job.question.id, error = %e, "releasing a completion slot failed; its lease will run out");
                }
                pb::completion_event::Event::Error(pb::CompletionError {
                    message: format!("the reply could not be stored: {}", e.message),
                    message_id: None,
                })
            }
        };
        let _ = tx.send(Ok(event(last))).await;
    }
}

fn event(e: pb::completion_event::Event) -> pb::CompletionEvent {
    pb::CompletionEvent { event: Some(e) }
}

pub(crate) fn model_error(e: ChatError) -> ApiError {
    match e {
        ChatError::Upstream { status: 429, .. } => {
            ApiError::new(ErrorCode::TooManyRequests, e.to_string())
        }
        _ => ApiError::new(ErrorCode::Unavailable, e.to_string()),
    }
}

/// Whether a reply ends at the end of a thought (a sentence or paragraph).
fn ends_thought(text: &str) -> bool {
    let t = text.trim_end_matches([' ', '\t', '"', '\'', ')', '*']);
    text.ends_with('\n') || t.ends_with(['.', '!', '?', '。', ':'])
}

/// Calls made for one reply, for usage_stats and the ledger.
#[derive(Default)]
struct UsageLog {
    calls: Vec<Call>,
}

struct Call {
    purpose: &'static str,
    prompt_tokens: u64,
    completion_tokens: u64,
    cost: f64,
}

impl UsageLog {
    fn add(
        &mut self,
        job: &Job,
        purpose: &'static str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) {
        let cost = cost(job.prices, prompt_tokens, completion_tokens);
        self.calls.push(Call {
            purpose,
            prompt_tokens,
            completion_tokens,
            cost,
        });
    }
}

/// What a call costs at `prices` (per million input and output tokens).
pub(crate) fn cost(prices: (f64, f64), prompt_tokens: u64, completion_tokens: u64) -> f64 {
    (prompt_tokens as f64 * prices.0 + completion_tokens as f64 * prices.1) / 1_000_000.0
}

#[derive(Default)]
struct Reply {
    text: String,
    error: Option<String>,
    references: Vec<SearchHit>,
    prompt_raw: String,
    first_token: Option<f64>,
}

struct Prompt {
    messages: Vec<ChatMessage>,
    hits: Vec<SearchHit>,
}

/// A chunk as summarization reads it: where it comes from, then its text.
fn excerpt_text(hit: &SearchHit) -> String {
    format!(
        "{}{}\n{}",
        hit.document_name,
        pages_of(hit),
        hit.text.trim()
    )
}

/// Consecutive pieces joined into groups of at most `limit` characters (a longer piece is
/// a group of its own, cut to the limit).
fn group(pieces: &[String], limit: usize) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    let mut current = String::new();
    for piece in pieces {
        if !current.is_empty() && current.len() + piece.len() + 2 > limit {
            groups.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        let end = (0..=piece.len().min(limit))
            .rev()
            .find(|i| piece.is_char_boundary(*i))
            .unwrap_or(0);
        current.push_str(&piece[..end]);
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

fn pages_of(hit: &SearchHit) -> String {
    if hit.pages.is_empty() {
        String::new()
    } else {
        format!(
            ", page {}",
            hit.pages
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn excerpts(hits: &[SearchHit]) -> String {
    let mut out = String::from(RAG_INSTRUCTIONS);
    for (i, hit) in hits.iter().enumerate() {
        out.push_str(&format!(
            "\n\n[{}] {}{}\n{}",
            i + 1,
            hit.document_name,
            pages_of(hit),
            hit.text.trim()
        ));
    }
    out
}

/// System prompt, excerpts and as much recent history as fits the model's context (about
/// four characters a token), then the question.
fn build_prompt(
    question: &str,
    history: &[messages::Model],
    mut hits: Vec<SearchHit>,
    notes: Option<&str>,
    context_length: u64,
    max_new_tokens: u32,
) -> Prompt {
    let budget = context_budget(question, context_length, max_new_tokens);
    // Excerpts first (best first), then history from the most recent back. Notes were
    // already made to fit; the excerpts they summarize stay the references.
    let context = match notes {
        Some(notes) => format!("{NOTES_INSTRUCTIONS}\n\n{notes}"),
        None => {
            let mut context = excerpts(&hits);
            while !hits.is_empty() && context.len() > budget {
                hits.pop();
                context = excerpts(&hits);
            }
            context
        }
    };
    let has_context = notes.is_some() || !hits.is_empty();
    let mut left = if has_context {
        budget.saturating_sub(context.len())
    } else {
        budget
    };
    let mut kept: Vec<ChatMessage> = Vec::new();
    for m in history.iter().rev() {
        if m.content.is_empty() || m.content.len() > left {
            break;
        }
        left -= m.content.len();
        kept.push(if m.reply_to.is_some() {
            ChatMessage::assistant(m.content.clone())
        } else {
            ChatMessage::user(m.content.clone())
        });
    }
    kept.reverse();
    let mut messages = vec![ChatMessage::system(SYSTEM_PROMPT)];
    if has_context {
        messages.push(ChatMessage::system(context));
    }
    messages.extend(kept);
    messages.push(ChatMessage::user(question));
    Prompt { messages, hits }
}

/// Characters of the prompt left for context and history (about four a token).
fn context_budget(question: &str, context_length: u64, max_new_tokens: u32) -> usize {
    (context_length.saturating_sub(u64::from(max_new_tokens)) as usize)
        .saturating_mul(4)
        .saturating_sub(question.len() + SYSTEM_PROMPT.len())
}

/// Time-ordered ids, so a reply sorts after its question even within one clock tick.
fn message_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A question to store.
struct Question<'a> {
    session_id: &'a str,
    content: &'a str,
    /// Whether to read the conversation history.
    history: bool,
    concurrency_cap: Option<i64>,
}

/// A stored question with its session and the history before it.
struct Stored {
    session: chat_sessions::Model,
    question: messages::Model,
    history: Vec<messages::Model>,
}

/// Stores the question in the caller's session and claims its concurrency slot, in one
/// transaction of one batch (see [`Batch`]): the session, the history before the question
/// and the count of running completions are read in it too. `admit` then decides with the
/// session; the question is committed only when it and the concurrency cap agree.
async fn store_question<T>(
    db: &DatabaseConnection,
    caller: &Caller,
    asked: Question<'_>,
    admit: impl FnOnce(&chat_sessions::Model) -> ApiResult<T>,
) -> ApiResult<(Stored, T)> {
    let at = now();
    let question = messages::Model {
        id: message_id(),
        session_id: asked.session_id.to_owned(),
        owner_id: caller.user_id.clone(),
        username: caller.username.clone(),
        content: asked.content.to_owned(),
        reply_to: None,
        votes: 0,
        has_references: false,
        total_references: 0,
        error: None,
        created_at: at,
    };
    let txn = db.begin().await?;
    let mut batch = Batch::new(txn.get_database_backend());
    batch.push(
        &chat_sessions::Entity::find_by_id(asked.session_id.to_owned())
            .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
            .expr_as(tag("session"), TAG)
            .into_query(),
    );
    if asked.history {
        batch.push(
            &messages::Entity::find()
                .filter(messages::Column::SessionId.eq(asked.session_id))
                .filter(messages::Column::Id.lt(question.id.clone()))
                .order_by_desc(messages::Column::Id)
                .limit(HISTORY_MESSAGES)
                .expr_as(tag("history"), TAG)
                .into_query(),
        );
    }
    limits::claim(
        &mut batch,
        &caller.user_id,
        &question.id,
        asked.concurrency_cap,
    );
    // The writes: nothing is read back.
    batch.push(
        &messages::Entity::insert(messages::ActiveModel::from(question.clone())).into_query(),
    );
    batch.push(
        &chat_sessions::Entity::update_many()
            .col_expr(
                chat_sessions::Column::LatestMessageContent,
                Expr::value(asked.content.to_owned()),
            )
            .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at))
            // An unnamed session is named after its first question.
            .col_expr(
                chat_sessions::Column::Name,
                Func::coalesce([
                    Expr::col(chat_sessions::Column::Name).into(),
                    Expr::val(asked.content.chars().take(60).collect::<String>()).into(),
                ])
                .into(),
            )
            .filter(chat_sessions::Column::Id.eq(asked.session_id))
            .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
            .into_query(),
    );
    let rows = match batch.run(&txn).await {
        Ok(rows) => rows,
        Err(e) => {
            // A session that does not exist fails the question's foreign key: answer 404.
            drop(txn);
            crate::sessions::get(db, caller, asked.session_id).await?;
            return Err(e.into());
        }
    };
    let admitted = tagged(&rows, "session")
        .next()
        .map(|row| chat_sessions::Model::from_query_result(row, ""))
        .transpose()?
        .ok_or_else(|| crate::sessions::not_found(asked.session_id))
        .and_then(|session| {
            let admitted = admit(&session)?;
            limits::check_claim(&rows, asked.concurrency_cap)?;
            Ok((session, admitted))
        });
    let (session, admitted) = match admitted {
        Ok(a) => a,
        Err(e) => {
            txn.rollback().await?;
            return Err(e);
        }
    };
    let mut history = tagged(&rows, "history")
        .map(|row| messages::Model::from_query_result(row, ""))
        .collect::<Result<Vec<_>, _>>()?;
    history.reverse();
    txn.commit().await?;
    Ok((
        Stored {
            session,
            question,
            history,
        },
        admitted,
    ))
}

/// Stores the reply, books its model calls and frees its concurrency slot, in one
/// transaction of one batch (see [`Batch`]). Returns the reply's id, or None when the
/// session was deleted meanwhile: the reply then has nothing to attach to, but its model
/// calls were made and are booked.
async fn store_reply(
    db: &DatabaseConnection,
    job: &Job,
    reply: &Reply,
    usage: &UsageLog,
    elapsed: f64,
) -> ApiResult<Option<String>> {
    let id = message_id();
    match write_reply(db, job, Some((reply, elapsed)), usage, &id).await {
        Ok(()) => Ok(Some(id)),
        // The session is almost always still there, so the reply is written as if it
        // were; a deleted one fails the reply's foreign key, and only then is it asked for.
        Err(e) if session_exists(db, &job.session.id).await? => Err(e),
        Err(_) => {
            write_reply(db, job, None, usage, &id).await?;
            Ok(None)
        }
    }
}

async fn session_exists(db: &DatabaseConnection, id: &str) -> ApiResult<bool> {
    Ok(chat_sessions::Entity::find_by_id(id.to_owned())
        .select_only()
        .column(chat_sessions::Column::Id)
        .into_tuple::<String>()
        .one(db)
        .await?
        .is_some())
}

/// One transaction: the `usage.llm` events of the reply's model calls, the reply (when
/// given) with the session's update, and the release of the concurrency slot.
async fn write_reply(
    db: &DatabaseConnection,
    job: &Job,
    reply: Option<(&Reply, f64)>,
    usage: &UsageLog,
    id: &str,
) -> ApiResult<()> {
    let events: Vec<_> = usage
        .calls
        .iter()
        .map(|call| {
            usage_event(&LlmUsage {
                user_id: job.caller.user_id.clone(),
                model: job.model_name.clone(),
                prompt_tokens: call.prompt_tokens,
                completion_tokens: call.completion_tokens,
                cost: call.cost,
                purpose: call.purpose.to_owned(),
                message_id: id.to_owned(),
                calls: 1,
            })
        })
        .collect();
    let txn = db.begin().await?;
    let mut batch = Batch::new(txn.get_database_backend());
    if let Some(insert) = outbox::insert_statement(&events) {
        batch.push(&insert);
    }
    if let Some((reply, elapsed)) = reply {
        reply_statements(&mut batch, job, reply, usage, elapsed, id);
    }
    batch.push(&limits::release_statement(&job.question.id));
    // Nothing is read back, and the transaction rolls back (on drop) if the batch fails.
    batch.run(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// The reply's rows (the message, its references and its metadata) and the session's
/// update.
fn reply_statements(
    batch: &mut Batch,
    job: &Job,
    reply: &Reply,
    usage: &UsageLog,
    elapsed: f64,
    id: &str,
) {
    let at = now();
    batch.push(
        &messages::Entity::insert(messages::ActiveModel {
            id: Set(id.to_owned()),
            session_id: Set(job.session.id.clone()),
            owner_id: Set(job.caller.user_id.clone()),
            username: Set(job.caller.username.clone()),
            content: Set(reply.text.clone()),
            reply_to: Set(Some(job.question.id.clone())),
            votes: Set(0),
            has_references: Set(!reply.references.is_empty()),
            total_references: Set(reply.references.len() as i64),
            error: Set(reply.error.clone()),
            created_at: Set(at),
        })
        .into_query(),
    );
    let references: Vec<message_references::ActiveModel> = reply
        .references
        .iter()
        .enumerate()
        .map(|(rank, hit)| message_references::ActiveModel {
            message_id: Set(id.to_owned()),
            rank: Set(rank as i32),
            document_id: Set(hit.document_id.clone()),
            document_name: Set(hit.document_name.clone()),
            collection_id: Set(hit.collection_id.clone()),
            chunk_id: Set(hit.chunk_id),
            pages: Set(hit
                .pages
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")),
            score: Set(hit.score),
            content: Set(hit.text.clone()),
            ..Default::default()
        })
        .collect();
    if !references.is_empty() {
        batch.push(&message_references::Entity::insert_many(references).into_query());
    }
    let (prompt_tokens, completion_tokens, cost) = usage.calls.iter().fold((0, 0, 0.0), |t, c| {
        (
            t.0 + c.prompt_tokens,
            t.1 + c.completion_tokens,
            t.2 + c.cost,
        )
    });
    let stats = serde_json::json!({
        "llm": job.model_name,
        "input_tokens": prompt_tokens,
        "output_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "cost": cost,
        "response_time": elapsed,
        "time_to_first_token": reply.first_token,
        "calls": usage.calls.iter().map(|c| serde_json::json!({
            "purpose": c.purpose,
            "input_tokens": c.prompt_tokens,
            "output_tokens": c.completion_tokens,
            "cost": c.cost,
        })).collect::<Vec<_>>(),
    });
    let mut meta = vec![("usage_stats", stats.to_string())];
    if !reply.prompt_raw.is_empty() {
        meta.push(("prompt_raw", reply.prompt_raw.clone()));
    }
    batch.push(
        &message_meta::Entity::insert_many(meta.into_iter().map(|(info_type, content)| {
            message_meta::ActiveModel {
                message_id: Set(id.to_owned()),
                info_type: Set(info_type.to_owned()),
                content: Set(content),
                ..Default::default()
            }
        }))
        .into_query(),
    );
    let mut touch = chat_sessions::Entity::update_many()
        .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at));
    if !reply.text.is_empty() {
        touch = touch.col_expr(
            chat_sessions::Column::LatestMessageContent,
            Expr::value(reply.text.clone()),
        );
    }
    batch.push(
        &touch
            .filter(chat_sessions::Column::Id.eq(&job.session.id))
            .into_query(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rag_types_follow_the_spec() {
        assert_eq!(RagMode::choose("", false, true).unwrap(), RagMode::Rag);
        assert_eq!(
            RagMode::choose("auto", false, false).unwrap(),
            RagMode::LlmOnly
        );
        assert_eq!(
            RagMode::choose("agent_only", false, true).unwrap(),
            RagMode::Rag
        );
        assert_eq!(
            RagMode::choose("hyde2", false, true).unwrap(),
            RagMode::Hyde2
        );
        assert_eq!(
            RagMode::choose("llm_only", false, true).unwrap(),
            RagMode::LlmOnly
        );
        assert_eq!(
            RagMode::choose("rag+", false, true).unwrap(),
            RagMode::RagPlus
        );
        assert_eq!(
            RagMode::choose("all_data", false, true).unwrap(),
            RagMode::AllData
        );
        for (rag_type, agent, collection) in [
            ("rag", false, false),
            ("rag+", false, false),
            ("all_data", false, false),
            ("hyde1", false, false),
            ("agentic_rag", false, true),
            ("rlm_rag", false, true),
            ("rag", true, true),
            ("nonsense", false, true),
        ] {
            let e = RagMode::choose(rag_type, agent, collection).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{rag_type}");
        }
    }

    #[test]
    fn pieces_group_within_the_limit_in_order() {
        let pieces: Vec<String> = ["aaaa", "bbbb", "cccc", "dddddddddddd"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let groups = group(&pieces, 10);
        assert_eq!(groups, ["aaaa\n\nbbbb", "cccc", "dddddddddd"]);
        assert!(group(&[], 10).is_empty());
    }

    #[test]
    fn thoughts_end_at_sentence_ends() {
        assert!(ends_thought("It is Paris."));
        assert!(ends_thought("Really?\"  "));
        assert!(ends_thought("Line\n"));
        assert!(!ends_thought("It is Par"));
    }

    fn hit(text: &str) -> SearchHit {
        SearchHit {
            document_name: "notes.md".into(),
            text: text.into(),
            pages: vec![2],
            ..Default::default()
        }
    }

    #[test]
    fn prompts_fit_the_context_and_keep_recent_history() {
        let old = |content: &str, reply: bool| messages::Model {
            id: String::new(),
            session_id: String::new(),
            owner_id: String::new(),
            username: String::new(),
            content: content.into(),
            reply_to: reply.then(|| "q".to_owned()),
            votes: 0,
            has_references: false,
            total_references: 0,
            error: None,
            created_at: now(),
        };
        let history = [old("first question", false), old("first answer", true)];
        let p = build_prompt(
            "why?",
            &history,
            vec![hit("Paris is the capital.")],
            None,
            8192,
            1536,
        );
        let roles: Vec<&str> = p.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "system", "user", "assistant", "user"]);
        assert!(
            p.messages[1]
                .content
                .contains("[1] notes.md, page 2\nParis")
        );
        // A tiny context drops excerpts and history before the question.
        let p = build_prompt(
            "why?",
            &history,
            vec![hit(&"x".repeat(5000))],
            None,
            1600,
            1536,
        );
        assert!(p.hits.is_empty());
        assert_eq!(p.messages.last().unwrap().content, "why?");
    }
}
