//! Agent completions: agent-service answers the question (its Run stream), chat-service
//! keeps the conversation. The run is checked (CheckRun) before the question is stored, so
//! a bad agent_* argument or a model that cannot call tools is a 400 that changes nothing.
//! The agent's text streams to the client like a model's; pause, resume, stop and finish
//! (from any replica, through [`crate::control`]) are forwarded to the run; the reply is
//! stored with the agent's metadata, references and model calls (booked by agent-service,
//! so counted in usage_stats and not booked again).

use std::time::Instant;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_proto::agent::v1::{self as apb, RagKind, run_event::Event, run_input::Input};
use docchat_proto::ingest::v1::SearchHit;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::generate::{Outgoing, deliver};
use super::store::{Call, Reply, UsageLog};
use super::{Completer, Job};
use crate::control::{Registration, State};

/// How long a run may take to finish after it was told to stop at shutdown.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// What the agent run of a job was accepted with.
#[derive(Debug, Clone)]
pub(super) struct AgentPlan {
    pub(super) kind: RagKind,
    /// The agent_* keys of llm_args, JSON.
    pub(super) args_json: String,
}

impl Completer {
    /// Asks agent-service whether this run can start; answers the model it will call.
    pub(super) async fn check_agent(
        &self,
        caller: &Caller,
        llm: &str,
        kind: RagKind,
        has_collection: bool,
        args_json: &str,
    ) -> ApiResult<apb::RunAccepted> {
        Ok(self
            .clients
            .agent(caller)
            .check_run(apb::RunCheck {
                model: llm.to_owned(),
                rag_kind: kind as i32,
                has_collection,
                agent_args_json: args_json.to_owned(),
            })
            .await?
            .into_inner())
    }

    /// Runs the agent for `job`, streaming its text to the client through `out` as it is
    /// stored in the question's row; answers the reply to store and
    /// the model calls it made.
    pub(super) async fn agent_reply(
        &self,
        job: &Job,
        plan: &AgentPlan,
        out: &mut Outgoing,
        control: &mut watch::Receiver<State>,
        registration: &Registration,
        started: Instant,
    ) -> (Reply, UsageLog) {
        let mut reply = Reply::default();
        let start = match self.run_start(job, plan).await {
            Ok(s) => s,
            Err(e) => {
                reply.error = Some(e);
                return (reply, UsageLog::default());
            }
        };
        let start_contexts = start.contexts.clone();
        let (input, inputs) = mpsc::channel(4);
        let _ = input
            .send(apb::RunInput {
                input: Some(Input::Start(start)),
            })
            .await;
        let mut events = match self
            .clients
            .agent(&job.caller)
            .run(ReceiverStream::new(inputs))
            .await
        {
            Ok(r) => r.into_inner(),
            Err(status) => {
                reply.error = Some(status.into());
                return (reply, UsageLog::default());
            }
        };
        // Armed at shutdown: how long the stopped run may take to say it finished.
        let grace = tokio::time::sleep(std::time::Duration::MAX);
        tokio::pin!(grace);
        let mut stopping = false;
        let mut controlled = true;
        let finished = loop {
            let next = tokio::select! {
                biased;
                () = self.shutdown.cancelled(), if !stopping => {
                    reply.error = Some(super::generate::interrupted());
                    send(&input, "stop").await;
                    stopping = true;
                    grace.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                    continue;
                }
                () = &mut grace, if stopping => break None,
                changed = control.changed(), if controlled => {
                    if changed.is_err() {
                        controlled = false;
                    } else {
                        let state = *control.borrow_and_update();
                        send(&input, word(state)).await;
                    }
                    continue;
                }
                () = out.stored_more() => {
                    out.forward(&reply.text).await;
                    continue;
                }
                next = events.message() => next,
            };
            match next {
                Ok(Some(apb::RunEvent {
                    event: Some(Event::Delta(text)),
                })) => {
                    // As a model's: a client that went away does not stop the run.
                    deliver(&mut reply, &text, started, registration);
                }
                Ok(Some(apb::RunEvent {
                    event: Some(Event::Finished(f)),
                })) => break Some(f),
                Ok(Some(_)) => {}
                Ok(None) => break None,
                Err(status) => {
                    if reply.error.is_none() {
                        reply.error = Some(status.into());
                    }
                    break None;
                }
            }
        };
        drop(input);
        let Some(f) = finished else {
            if reply.error.is_none() {
                reply.error = Some(ApiError::new(
                    ErrorCode::Unavailable,
                    "the agent stopped answering before it finished",
                ));
            }
            return (reply, UsageLog::default());
        };
        let usage = UsageLog {
            calls: f
                .calls
                .iter()
                .map(|c| Call {
                    purpose: c.purpose.clone(),
                    prompt_tokens: c.prompt_tokens,
                    completion_tokens: c.completion_tokens,
                    cost: c.cost,
                    booked: true,
                })
                .collect(),
        };
        if f.failed && reply.error.is_none() {
            let code = u16::try_from(f.status)
                .ok()
                .and_then(ErrorCode::from_http)
                .unwrap_or(ErrorCode::BadGateway);
            reply.error = Some(ApiError::new(code, f.stop_reason.clone()));
        }
        reply.text = f.text;
        reply.prompt_raw = f.prompt_raw;
        // fast_agentic_rag's contexts first (the answer was written from them), then what
        // the agent's own searches found.
        reply.references = start_contexts
            .into_iter()
            .chain(f.references)
            .map(SearchHit::from)
            .collect();
        let files = |files: &[apb::AgentFile]| {
            serde_json::Value::Array(
                files
                    .iter()
                    .map(|file| serde_json::json!({ file.document_id.clone(): file.name }))
                    .collect(),
            )
            .to_string()
        };
        reply.meta = vec![
            ("agent_files", files(&f.files)),
            ("agent_files_old", files(&f.files_old)),
            ("agent_chat_history", f.history_json),
            ("agent_chat_history_md", f.history_md),
            ("agent_analysis", f.analysis),
        ];
        (reply, usage)
    }

    /// The run's start: the conversation, and for fast_agentic_rag the retrieved excerpts.
    async fn run_start(&self, job: &Job, plan: &AgentPlan) -> ApiResult<apb::RunStart> {
        let contexts = if plan.kind == RagKind::Fast {
            self.search(job, &job.question.content)
                .await?
                .into_iter()
                .map(apb::Excerpt::from)
                .collect()
        } else {
            Vec::new()
        };
        let (memory_extra, question) =
            super::memory::for_agent(job.memory.as_ref(), &job.question.content);
        let system_prompt_extra = [job.system_prompt.as_deref().unwrap_or(""), &memory_extra]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        Ok(apb::RunStart {
            session_id: job.session.id.clone(),
            session_preview: job
                .session
                .name
                .clone()
                .unwrap_or_else(|| job.question.content.chars().take(60).collect()),
            collection_id: job.session.collection_id.clone().unwrap_or_default(),
            question_id: job.question.id.clone(),
            question,
            history: job
                .history
                .iter()
                .filter(|m| !m.content.is_empty())
                .map(|m| apb::HistoryMessage {
                    role: if m.reply_to.is_some() {
                        "assistant"
                    } else {
                        "user"
                    }
                    .into(),
                    content: m.content.clone(),
                })
                .collect(),
            model: job.model_name.clone(),
            rag_kind: plan.kind as i32,
            contexts,
            temperature: f64::from(job.temperature),
            max_new_tokens: job.max_new_tokens,
            agent_args_json: plan.args_json.clone(),
            system_prompt_extra,
            memory: super::memory::run_memory(job.memory.as_ref()),
        })
    }
}

/// The control word that brings a run to `state`.
fn word(state: State) -> &'static str {
    match state {
        State::Streaming => "resume",
        State::Paused => "pause",
        State::Stopped => "stop",
        State::Finishing => "finish",
    }
}

async fn send(input: &mpsc::Sender<apb::RunInput>, word: &str) {
    // A run that already ended has closed its input: nothing to tell it.
    let _ = input
        .send(apb::RunInput {
            input: Some(Input::Control(word.to_owned())),
        })
        .await;
}
