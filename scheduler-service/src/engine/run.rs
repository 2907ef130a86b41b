//! An execution runs as the task's owner: their identity from admin-service, a chat session
//! created by them (linked to task_config.collection_id), then the completion through
//! chat-service's `Complete` stream — a plain or RAG answer for chat_completion, an agent run
//! for agent_task — so the owner's limits, cost caps and default memory blocks apply as to
//! any of their chats. A collection that no longer exists fails the execution with one line
//! naming it, and the task stops running: it is paused until its owner points
//! task_config.collection_id elsewhere (or unbinds it) and resumes it.

use std::sync::{Arc, Mutex};

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_proto::admin::v1::GetIdentityRequest;
use docchat_proto::chat::v1 as chat;
use docchat_proto::chat::v1::completion_event::Event;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::config::TaskConfig;
use super::store::{self, Outcome};
use super::{Inner, notify};
use crate::entities::{scheduled_tasks as tasks, task_executions as executions};

/// Runs a claimed execution to its end (or until `stop`: it was canceled).
pub(super) async fn scheduled(
    inner: Arc<Inner>,
    execution: executions::Model,
    task: tasks::Model,
    stop: CancellationToken,
) {
    let outcome = match owner(&inner, &task).await {
        Ok(caller) => match open_session(&inner, &caller, &task).await {
            Ok(session) => {
                if let Err(e) = store::set_session(&inner.db, &execution.id, &session).await {
                    tracing::warn!(error = %e.message, "recording an execution's session failed");
                }
                complete(&inner, &caller, &task, &session, &stop).await
            }
            // open_session's only NOT_FOUND: the task's collection is gone.
            Err(e) if e.code == ErrorCode::NotFound => {
                match store::pause(&inner.db, &task.id).await {
                    Ok(()) => Outcome::Failed(format!("{}; the task is paused", e.message)),
                    Err(db) => {
                        tracing::warn!(error = %db, "pausing a task whose collection is gone failed");
                        Outcome::Failed(e.message)
                    }
                }
            }
            Err(e) => Outcome::Failed(e.message),
        },
        Err(e) => Outcome::Failed(e.message),
    };
    end(&inner, &execution.id, outcome).await;
}

/// The completion of a running execution whose session exists, to its end.
pub(super) async fn finish_in_session(
    inner: Arc<Inner>,
    execution_id: String,
    caller: Caller,
    task: tasks::Model,
    session: String,
    stop: CancellationToken,
) {
    let outcome = complete(&inner, &caller, &task, &session, &stop).await;
    end(&inner, &execution_id, outcome).await;
}

/// Records the outcome and sends the notification, if one is asked for.
pub(super) async fn end(inner: &Inner, execution_id: &str, outcome: Outcome) {
    let label = match &outcome {
        Outcome::Completed(_) => "completed",
        Outcome::Failed(_) => "failed",
        Outcome::Lapsed => "lapsed",
    };
    let ended = store::finish(&inner.db, execution_id, outcome, None).await;
    inner.release(execution_id);
    match ended {
        Ok(Some((execution, email))) => {
            crate::metrics::ended(&execution.trigger_source, label);
            inner.relay.notify();
            tracing::info!(execution_id, status = %execution.status, task = %execution.task_name, "task execution ended");
            notify::send(inner.notifier.as_ref(), &email, &execution).await;
        }
        Ok(None) => {
            tracing::info!(
                execution_id,
                "the execution had already ended (reaped or deleted)"
            );
        }
        Err(e) => {
            tracing::error!(execution_id, error = %e.message, "recording an execution's end failed; its lease will lapse and the reaper fails it");
        }
    }
}

/// The task owner's identity as admin-service knows it now.
pub(super) async fn owner(inner: &Inner, task: &tasks::Model) -> ApiResult<Caller> {
    let identity = inner
        .clients
        .admin(&Caller::service("scheduler"))
        .get_identity(GetIdentityRequest {
            user_id: task.user_id.clone(),
        })
        .await
        .map_err(|s| {
            let e = ApiError::from(s);
            if e.code == ErrorCode::NotFound {
                ApiError::not_found(format!(
                    "the task's owner {} no longer exists",
                    task.username
                ))
            } else {
                e
            }
        })?
        .into_inner();
    Ok(Caller::from(identity))
}

/// A new chat session of the owner for this execution, linked to the task's collection;
/// NOT_FOUND means that collection is gone.
pub(super) async fn open_session(
    inner: &Inner,
    caller: &Caller,
    task: &tasks::Model,
) -> ApiResult<String> {
    let config = TaskConfig::parse(&task.task_config)?;
    let collection = config.collection().map(str::to_owned);
    let created = inner
        .clients
        .chat(caller)
        .create_session(chat::CreateSessionRequest {
            collection_id: collection.clone(),
        })
        .await;
    match (created, collection) {
        (Ok(session), _) => Ok(session.into_inner().id),
        (Err(s), Some(id)) if s.code() == tonic::Code::NotFound => {
            Err(ApiError::not_found(format!(
                "collection {id} of task_config.collection_id no longer exists (or its owner cannot read it)"
            )))
        }
        (Err(s), _) => Err(ApiError::from(s)),
    }
}

/// Asks chat-service for the task's answer in `session`. When `stop` fires first (the
/// execution was canceled, or the service stops), chat-service is told to stop the reply.
async fn complete(
    inner: &Inner,
    caller: &Caller,
    task: &tasks::Model,
    session: &str,
    stop: &CancellationToken,
) -> Outcome {
    let question = Mutex::new(None);
    let outcome = tokio::select! {
        outcome = answer(inner, caller, task, session, &question) => return match outcome {
            Ok(body) => Outcome::Completed(body),
            Err(e) => Outcome::Failed(e.message),
        },
        () = stop.cancelled() => if inner.token.is_cancelled() {
            Outcome::Failed("scheduler-service stopped during the execution".into())
        } else {
            Outcome::Failed("canceled".into())
        },
    };
    let question = question.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(question_id) = question {
        let request = chat::ControlRequest {
            question_id,
            action: "stop".into(),
        };
        if let Err(e) = inner.clients.chat(caller).control_message(request).await {
            tracing::warn!(error = %e.message(), "stopping the reply of a stopped execution failed");
        }
    }
    outcome
}

/// The answer's text; the question's id goes to `question` as soon as it is known.
async fn answer(
    inner: &Inner,
    caller: &Caller,
    task: &tasks::Model,
    session: &str,
    question: &Mutex<Option<String>>,
) -> ApiResult<String> {
    let config = TaskConfig::parse(&task.task_config)?;
    let request = config.completion(session, task.task_type == "agent_task");
    let mut events = inner
        .clients
        .chat(caller)
        .complete(request)
        .await?
        .into_inner();
    let mut text = String::new();
    while let Some(item) = events.next().await {
        match item?.event {
            Some(Event::Delta(delta)) => text.push_str(&delta),
            Some(Event::Done(done)) => {
                return Ok(if done.body.is_empty() {
                    text
                } else {
                    done.body
                });
            }
            Some(Event::Error(e)) => {
                return Err(ApiError::new(ErrorCode::Unavailable, e.message));
            }
            Some(Event::QuestionId(id)) => {
                *question.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
            }
            None => {}
        }
    }
    Err(ApiError::new(
        ErrorCode::Unavailable,
        "the reply ended before it was finished",
    ))
}
