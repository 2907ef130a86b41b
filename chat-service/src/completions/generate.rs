//! The generation loop: waits for a fairness slot, builds the prompt, streams the model's
//! answer to the client under control (pause, resume, stop, finish) and the service's
//! shutdown, then stores the reply — whole, partial or failed — and says how it ended.

use std::time::Instant;

use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use tokio::sync::watch;

use super::prompt::Prompt;
use super::store::{Reply, UsageLog, store_reply};
use super::{Completer, Events, Job, event};
use crate::control::{Registration, State};
use crate::gate::model_error;
use crate::limits;
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
        let mut usage = UsageLog::default();
        let _slot = match job.priority {
            Some(priority) => {
                tokio::select! {
                    permit = self.gate.slot(Some(priority)) => permit,
                    _ = async { control.wait_for(|s| *s == State::Stopped).await.is_ok() } => {
                        // Stopped while queued: nothing was generated.
                        self.finish(&job, Reply::default(), usage, started, &tx).await;
                        return;
                    }
                    () = self.shutdown.cancelled() => {
                        let reply = Reply { error: Some(interrupted()), ..Reply::default() };
                        self.finish(&job, reply, usage, started, &tx).await;
                        return;
                    }
                }
            }
            _ => None,
        };
        if let Some(plan) = &job.agent {
            let (reply, usage) = self
                .agent_reply(&job, plan, &tx, &mut control, &registration, started)
                .await;
            self.finish(&job, reply, usage, started, &tx).await;
            return;
        }
        let prompt = tokio::select! {
            prompt = self.prompt(&job, &mut usage) => prompt,
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
                reply.error = Some(model_error(e));
                self.finish(&job, reply, usage, started, &tx).await;
                return;
            }
        };
        let mut finishing_from: Option<usize> = None;
        let mut client = Some(tx.clone());
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
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => {
                    reply.error = Some(model_error(e));
                    break;
                }
                Some(Ok(StreamEvent::Delta(text))) => {
                    deliver(&mut reply, text, started, &registration, &mut client).await;
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
                    status: u32::from(e.code.http_status()),
                })
            }
        };
        let _ = tx.send(Ok(event(last))).await;
    }
}

/// Hands on the next piece of a reply: into the reply, into its progress record (written to
/// the question's row at a bounded rate, limits.rs, so a replica that dies leaves it to be
/// recovered), and to the client while it listens. A client that went away is forgotten:
/// the reply is still finished and stored.
pub(super) async fn deliver(
    reply: &mut Reply,
    text: String,
    started: Instant,
    registration: &Registration,
    client: &mut Option<Events>,
) {
    if reply.first_token.is_none() {
        reply.first_token = Some(started.elapsed().as_secs_f64());
    }
    reply.text.push_str(&text);
    registration.record(&text);
    if let Some(sender) = client
        && sender
            .send(Ok(event(pb::completion_event::Event::Delta(text))))
            .await
            .is_err()
    {
        *client = None;
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
