//! The generation loop: waits for a fairness slot, builds the prompt, streams the model's
//! answer to the client under control (pause, resume, stop, finish) and the service's
//! shutdown, then stores the reply — whole, partial or failed — and says how it ended.

use std::time::Instant;

use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use tokio::sync::watch;
use tracing::Instrument;

use super::prompt::{NOT_IN_DOCUMENTS, Prompt};
use super::store::{Reply, UsageLog, store_reply};
use super::{Completer, Events, Job, event};
use crate::control::{Lines, Registration, State};
use crate::gate::model_error;
use crate::limits;
use crate::marks::{Marks, final_seq, text_seq};
use crate::metrics;
use docchat_inference::StreamEvent;

/// After `finish`, the reply ends at the next sentence end, or after this many bytes.
const FINISH_GRACE_BYTES: usize = 400;
/// The error of a reply cut short by the service's shutdown.
pub(super) fn interrupted() -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        "the reply was interrupted: chat-service shut down",
    )
}

/// The error of a reply stopped because it stayed paused past `chat_max_pause_seconds`.
fn paused_too_long(max: std::time::Duration) -> ApiError {
    ApiError::new(
        ErrorCode::Timeout,
        format!(
            "the reply was paused longer than {} s (chat_max_pause_seconds) and was stopped; its text so far is kept",
            max.as_secs()
        ),
    )
}

impl Completer {
    pub(super) async fn generate(
        self,
        job: Job,
        tx: Events,
        mut control: watch::Receiver<State>,
        registration: Registration,
    ) {
        let started = Instant::now();
        let _active = metrics::active();
        let mut usage = UsageLog::default();
        let mut out = Outgoing::new(&tx, &registration);
        let _slot = match job.priority {
            Some(priority) => {
                let _queued = metrics::Queued::enter(priority.name());
                tokio::select! {
                    permit = self.gate.slot(Some(priority)) => permit,
                    _ = async { control.wait_for(|s| *s == State::Stopped).await.is_ok() } => {
                        // Stopped while queued: nothing was generated.
                        self.finish(&job, Reply::default(), usage, started, &mut out).await;
                        return;
                    }
                    () = self.shutdown.cancelled() => {
                        let reply = Reply { error: Some(interrupted()), ..Reply::default() };
                        self.finish(&job, reply, usage, started, &mut out).await;
                        return;
                    }
                }
            }
            _ => None,
        };
        if let Some(plan) = &job.agent {
            let (reply, usage) = self
                .agent_reply(&job, plan, &mut out, &mut control, &registration, started)
                .await;
            self.finish(&job, reply, usage, started, &mut out).await;
            return;
        }
        let prompt = tokio::select! {
            prompt = self.prompt(&job, &mut usage).instrument(tracing::info_span!("retrieval")) => prompt,
            () = self.shutdown.cancelled() => Err(interrupted()),
        };
        let prompt = match prompt {
            Ok(p) => p,
            Err(e) => {
                let reply = Reply {
                    text: String::new(),
                    error: Some(e),
                    ..Reply::default()
                };
                self.finish(&job, reply, usage, started, &mut out).await;
                return;
            }
        };
        let Prompt {
            messages,
            hits,
            trace,
            not_in_documents,
        } = prompt;
        let mut reply = Reply {
            references: hits,
            prompt_raw: serde_json::to_string_pretty(&messages).unwrap_or_default(),
            meta: trace.map(|t| ("retrieval_trace", t)).into_iter().collect(),
            ..Reply::default()
        };
        if not_in_documents {
            // No model call: the answer says so, with the closest passages as references.
            deliver(&mut reply, NOT_IN_DOCUMENTS, started, &registration);
            self.finish(&job, reply, usage, started, &mut out).await;
            return;
        }
        let mut stream = match job
            .model
            .stream(&messages, job.max_new_tokens, job.temperature)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                reply.error = Some(model_error(e));
                self.finish(&job, reply, usage, started, &mut out).await;
                return;
            }
        };
        // Kept with the progress: a replica that dies leaves its usage to be booked.
        let answer_prompt = match stream.usage().0 {
            0 => (reply.prompt_raw.len() as u64).div_ceil(4),
            counted => counted,
        };
        if let Ok(spent) = serde_json::to_string(&usage.spent(&job, answer_prompt)) {
            registration.spent(spent);
        }
        let mut finishing_from: Option<usize> = None;
        let mut paused_since: Option<tokio::time::Instant> = None;
        loop {
            let state = *control.borrow_and_update();
            if state != State::Paused {
                paused_since = None;
            }
            match state {
                State::Stopped => break,
                State::Paused => {
                    // Hold: read nothing from the model until the state changes, at most
                    // `max_pause` (then the reply stops, keeping its text).
                    tokio::select! {
                        changed = control.changed() => if changed.is_err() { break },
                        () = tokio::time::sleep_until(
                            *paused_since.get_or_insert_with(tokio::time::Instant::now) + self.max_pause
                        ) => {
                            reply.error = Some(paused_too_long(self.max_pause));
                            break;
                        }
                        () = self.shutdown.cancelled() => {
                            reply.error = Some(interrupted());
                            break;
                        }
                        // What was read before the pause still goes out as it is stored.
                        () = out.stored_more() => out.forward(&reply.text).await,
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
                    reply.error = Some(interrupted());
                    break;
                }
                changed = control.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                () = out.stored_more() => {
                    out.forward(&reply.text).await;
                    continue;
                }
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => {
                    reply.error = Some(model_error(e));
                    break;
                }
                Some(Ok(StreamEvent::Delta(text))) => {
                    deliver(&mut reply, &text, started, &registration);
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
        self.finish(&job, reply, usage, started, &mut out).await;
    }

    /// Stores the reply with its lines and tells the client how it ended.
    async fn finish(
        &self,
        job: &Job,
        mut reply: Reply,
        usage: UsageLog,
        started: Instant,
        out: &mut Outgoing,
    ) {
        let elapsed = started.elapsed().as_secs_f64();
        metrics::completion(
            job.mode.name(),
            if reply.error.is_some() { "error" } else { "ok" },
            &job.model_name,
            reply.first_token,
            elapsed,
        );
        // No more lines are cut: the final text's lines, stored with the reply.
        reply.marks = out.lines.seal(&reply.text);
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
                        status: u32::from(ErrorCode::NotFound.http_status()),
                    }),
                    (Some(reply_id), Some(error)) => {
                        pb::completion_event::Event::Error(pb::CompletionError {
                            message: error.message,
                            message_id: Some(reply_id),
                            status: u32::from(error.code.http_status()),
                        })
                    }
                    (Some(reply_id), None) => {
                        pb::completion_event::Event::Done(pb::CompletionDone {
                            message_id: reply_id,
                            body: reply.text.clone(),
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
                    status: u32::from(e.code.http_status()),
                })
            }
        };
        out.end(&reply.text, &reply.marks, last).await;
    }
}

/// Hands on the next piece of a reply: into the reply and into its progress record, which
/// limits.rs writes to the question's row as it grows. The client gets it through
/// [`Outgoing`] once it is written there, so a replica that dies leaves at least what its
/// client saw.
pub(super) fn deliver(
    reply: &mut Reply,
    text: &str,
    started: Instant,
    registration: &Registration,
) {
    if reply.first_token.is_none() {
        reply.first_token = Some(started.elapsed().as_secs_f64());
    }
    reply.text.push_str(text);
    registration.record(text);
}

/// The reply's text on its way to the client, in numbered lines (marks.rs): each line as
/// soon as the progress writer has stored it, the rest after the reply itself is stored
/// ([`Completer::finish`]). A client that went away is forgotten: the reply is still
/// finished and stored.
pub(super) struct Outgoing {
    tx: Events,
    /// The client still listens.
    listening: bool,
    lines: Lines,
    /// Lines of the reply's text sent.
    sent: usize,
    /// More lines may be stored (the generation is registered).
    marking: bool,
}

impl Outgoing {
    pub(super) fn new(tx: &Events, registration: &Registration) -> Outgoing {
        Outgoing {
            tx: tx.clone(),
            listening: true,
            lines: registration.lines(),
            sent: 0,
            marking: true,
        }
    }

    /// Waits until more lines are stored; never, once no more will be.
    pub(super) async fn stored_more(&mut self) {
        if !self.marking || !self.lines.changed().await {
            self.marking = false;
            std::future::pending::<()>().await;
        }
    }

    /// Sends the lines of `text` stored and not yet sent.
    pub(super) async fn forward(&mut self, text: &str) {
        let upto = self.lines.stored();
        if upto <= self.sent {
            return;
        }
        let lines = self.lines.texts(text, self.sent + 1, upto);
        self.sent = upto;
        for (n, line) in lines {
            self.send(pb::completion_event::Event::Delta(line), text_seq(n))
                .await;
        }
    }

    async fn send(&mut self, e: pb::completion_event::Event, seq: u64) {
        if self.listening && self.tx.send(Ok(event(e, seq))).await.is_err() {
            self.listening = false;
        }
    }

    /// Sends the lines of `marks` not sent yet (stored now with the reply), then how the
    /// reply ended.
    async fn end(&mut self, text: &str, marks: &Marks, last: pb::completion_event::Event) {
        for n in self.sent + 1..=marks.len() {
            if let Some(line) = marks.line(text, n) {
                self.send(
                    pb::completion_event::Event::Delta(line.to_owned()),
                    text_seq(n),
                )
                .await;
            }
        }
        self.sent = marks.len();
        self.send(last, final_seq(marks.len())).await;
    }
}

/// Whether a reply ends at the end of a thought (a sentence or paragraph).
fn ends_thought(text: &str) -> bool {
    let t = text.trim_end_matches([' ', '\t', '"', '\'', ')', '*']);
    text.ends_with('\n') || t.ends_with(['.', '!', '?', '。', ':'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thoughts_end_at_sentence_ends() {
        assert!(ends_thought("It is Paris."));
        assert!(ends_thought("Really?\"  "));
        assert!(ends_thought("Line\n"));
        assert!(!ends_thought("It is Par"));
    }
}
