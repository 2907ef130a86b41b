//! `GET /ws?currentSessionID=<chat session>&source=py`: the official client's chat session
//! (`H2OGPTE.connect()` → `Session.query()`, and `SessionAsync` alike) over a WebSocket.
//!
//! The upgrade is a request like any other: the key (`Authorization: Bearer`) is checked and
//! the chat session must be the caller's (401 and 404 before any upgrade, which the client
//! turns into its own errors). Each `{"t": "cq", ...}` text frame is one question, answered
//! through the same completion path as `POST /chats/{id}/completions` (chat-service's
//! `Complete`), and the reply goes back as the client reads it:
//!
//! - `cx` once the question is stored: `message_id` is the question's id (what the REST
//!   control calls — stop, finish, pause — take);
//! - `cp` for each piece of the reply as it is generated (`body` is the new text;
//!   `message_id` is the question's id until the reply is stored, so that concurrent queries
//!   stay apart in the async client, which matches partials by it);
//! - `ca` with the whole stored reply (`message_id` the reply's id, `reply_to_id` the
//!   question's);
//! - `ce` for an error: before `cx` it carries the query's `correlation_id` (the client
//!   matches it so), after it `reply_to_id`; a rate limit or cost cap says
//!   `error_type: "rate_limit"`, which the client raises as `RateLimitError`.
//!
//! Bounds: a frame is at most [`MAX_FRAME`] bytes (a larger one closes the connection with
//! 1009 before it is read whole); at most [`IN_FLIGHT`] queries are answered at once on one
//! connection (reading the socket waits meanwhile, so a flood of queries is held by TCP,
//! not in memory), each user's concurrent completions are capped by chat-service as on REST;
//! a client that does not read for [`SEND_TIMEOUT`] is disconnected. A reply whose
//! connection drops is generated and stored all the same; the client reconnects and the
//! new connection (on any replica) follows the session's reply still in progress from where
//! it stands, ending with its whole `ca`.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use actix_ws::{CloseCode, CloseReason, Message};
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::completions::{CompletionRequest, LlmArgs, RagConfig};
use crate::auth::Api;
use crate::error::{HttpError, bad_request};

/// The largest frame read: a question is at most 200,000 characters (SPEC.md), so 1 MiB
/// holds any valid query with its options.
pub const MAX_FRAME: usize = 1 << 20;

/// Queries answered at once on one connection; the next frame is read when one ends.
pub const IN_FLIGHT: usize = 4;

/// How long a frame may wait for the client to read before the connection is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Frames queued towards the client's socket.
const OUTBOX: usize = 64;

#[derive(Debug, Deserialize)]
pub struct SocketQuery {
    #[serde(rename = "currentSessionID")]
    pub current_session_id: Option<String>,
}

/// `GET /ws` (outside /api/v1, where the client looks for it; not in the OpenAPI document,
/// which has no words for a WebSocket).
pub async fn chat_socket(
    api: Api,
    req: HttpRequest,
    body: web::Payload,
    query: web::Query<SocketQuery>,
) -> Result<HttpResponse, actix_web::Error> {
    let session_id = query
        .into_inner()
        .current_session_id
        .filter(|id| !id.trim().is_empty())
        .ok_or_else(|| {
            bad_request("currentSessionID is required: /ws?currentSessionID=<chat session id>")
        })?;
    // Another user's session, or none: 404 before the upgrade.
    api.chat()
        .get_session(pb::SessionRef {
            id: session_id.clone(),
        })
        .await
        .map_err(HttpError::from)?;
    let (response, socket, frames) = actix_ws::handle(&req, body)?;
    let frames = frames.max_frame_size(MAX_FRAME);
    // A local task of this worker, like the connection it serves; it ends with the
    // connection, or when the gateway stops (closing the socket with 1001).
    actix_web::rt::spawn(Connection::new(api, session_id).serve(socket, frames));
    Ok(response)
}

/// A client's query frame (`h2ogpte.types.ChatRequest`). Options the client sends as JSON
/// strings (`llm_args`, `rag_config`, `self_reflection_config`) are read from them.
#[derive(Debug, Default, Deserialize)]
struct Query {
    t: String,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    correlation_id: String,
    #[serde(default)]
    body: String,
    system_prompt: Option<String>,
    pre_prompt_query: Option<String>,
    prompt_query: Option<String>,
    /// A model name, `auto`, or an index into the model list (`get_llms()`).
    llm: Option<serde_json::Value>,
    llm_args: Option<serde_json::Value>,
    rag_config: Option<serde_json::Value>,
    include_chat_history: Option<serde_json::Value>,
    tags: Option<serde_json::Value>,
    metadata_filter: Option<serde_json::Value>,
}

/// A frame towards the client: `cx`, `cp`, `ca` or `ce` (`ChatAcknowledgement` and
/// `ChatResponse` of the client, whose required fields are always present).
#[derive(Debug, Serialize)]
struct Frame<'a> {
    t: &'static str,
    session_id: &'a str,
    message_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reply_to_id: Option<&'a str>,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_type: Option<&'static str>,
}

impl<'a> Frame<'a> {
    fn reply(
        t: &'static str,
        session_id: &'a str,
        message_id: &'a str,
        reply_to: &'a str,
        body: &'a str,
    ) -> Frame<'a> {
        Frame {
            t,
            session_id,
            message_id,
            reply_to_id: Some(reply_to),
            body,
            error: Some(""),
            correlation_id: None,
            username: None,
            error_type: None,
        }
    }

    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One client connection: its caller, its chat session, and the queue of frames the writer
/// sends in order.
#[derive(Clone)]
struct Connection {
    api: Api,
    session_id: String,
    out: Option<mpsc::Sender<String>>,
    /// Cancelled when the connection ends, from either side.
    closed: CancellationToken,
}

impl Connection {
    fn new(api: Api, session_id: String) -> Connection {
        Connection {
            api,
            session_id,
            out: None,
            closed: CancellationToken::new(),
        }
    }

    async fn serve(mut self, socket: actix_ws::Session, mut frames: actix_ws::MessageStream) {
        let (tx, rx) = mpsc::channel::<String>(OUTBOX);
        self.out = Some(tx);
        let writer = write(socket.clone(), rx, self.closed.clone());
        let stopping = self.api.state().stopping.clone();
        let reader = async {
            let mut answering = FuturesUnordered::new();
            // A reply of this session still being generated (the client came back after a
            // dropped connection): followed from where it stands.
            answering.push(futures::future::Either::Left(self.clone().follow_running()));
            let reason = loop {
                tokio::select! {
                    () = self.closed.cancelled() => break None,
                    () = stopping.cancelled() => break Some(CloseReason::from((CloseCode::Away, "the server is stopping"))),
                    Some(()) = answering.next(), if !answering.is_empty() => {}
                    frame = frames.recv(), if answering.len() < IN_FLIGHT => match frame {
                        None | Some(Ok(Message::Close(_))) => break None,
                        Some(Err(e)) => {
                            let code = match e {
                                actix_ws::ProtocolError::Overflow => CloseCode::Size,
                                _ => CloseCode::Protocol,
                            };
                            break Some(CloseReason::from((code, e.to_string())));
                        }
                        Some(Ok(Message::Text(text))) => {
                            answering.push(futures::future::Either::Right(self.clone().answer(text.to_string())));
                        }
                        Some(Ok(Message::Binary(_))) => {
                            self.error_before_ack("", ApiError::bad_request("queries are text frames (JSON)")).await;
                        }
                        Some(Ok(Message::Ping(bytes))) => {
                            let mut pong = socket.clone();
                            if pong.pong(&bytes).await.is_err() {
                                break None;
                            }
                        }
                        Some(Ok(_)) => {}
                    },
                }
            };
            self.closed.cancel();
            reason
        };
        let (reason, ()) = futures::future::join(reader, writer).await;
        let _ = socket.close(reason).await;
    }

    /// Sends a frame in order; false once the connection is gone (or the client stopped
    /// reading for [`SEND_TIMEOUT`], which ends it).
    async fn send(&self, frame: &Frame<'_>) -> bool {
        let Some(out) = &self.out else { return false };
        match tokio::time::timeout(SEND_TIMEOUT, out.send(frame.text())).await {
            Ok(Ok(())) => true,
            _ => {
                self.closed.cancel();
                false
            }
        }
    }

    /// A `ce` before the question was stored: matched by the client on `correlation_id`.
    async fn error_before_ack(&self, correlation_id: &str, error: ApiError) {
        let frame = Frame {
            t: "ce",
            session_id: &self.session_id,
            message_id: "",
            reply_to_id: Some(""),
            body: "",
            error: Some(&error.message),
            correlation_id: Some(correlation_id),
            username: None,
            error_type: rate_limited(error.code.http_status()),
        };
        self.send(&frame).await;
    }

    /// Answers one query frame, to its final `ca` or `ce`.
    async fn answer(self, text: String) {
        let query: Query = match serde_json::from_str(&text) {
            Ok(q) => q,
            Err(e) => {
                // Whatever correlation id it carried, if any, so the client can match it.
                let correlation = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("correlation_id")?.as_str().map(str::to_owned))
                    .unwrap_or_default();
                self.error_before_ack(
                    &correlation,
                    ApiError::bad_request(format!("invalid query: {e}")),
                )
                .await;
                return;
            }
        };
        let correlation = query.correlation_id.clone();
        let request = match self.request(query).await {
            Ok(r) => r,
            Err(e) => return self.error_before_ack(&correlation, e).await,
        };
        let asked = request.message.clone();
        let mut chat = self.api.chat();
        let events = tokio::select! {
            () = self.closed.cancelled() => return,
            answer = chat.complete(request) => answer,
        };
        match events {
            Ok(events) => {
                self.forward(events.into_inner(), Some((&correlation, &asked)), None)
                    .await
            }
            Err(status) => {
                self.error_before_ack(&correlation, ApiError::from(status))
                    .await
            }
        }
    }

    /// The completion request a query asks for, checked as REST's is (400 for what it
    /// cannot take).
    async fn request(&self, query: Query) -> Result<pb::CompletionRequest, ApiError> {
        if query.t != "cq" {
            return Err(ApiError::bad_request(format!(
                "unknown message type {:?}: queries are \"cq\"",
                query.t
            )));
        }
        if query.session_id != self.session_id {
            return Err(ApiError::bad_request(
                "the query names another chat session than this connection's: connect to that session",
            ));
        }
        if present(query.metadata_filter.as_ref()) {
            return Err(ApiError::bad_request(
                "metadata_filter is not supported: choose documents with tags",
            ));
        }
        let llm = self.model_name(query.llm).await?;
        let llm_args: Option<LlmArgs> = json_option("llm_args", query.llm_args)?;
        let rag_config: Option<RagConfig> = json_option("rag_config", query.rag_config)?;
        let request = CompletionRequest {
            message: query.body,
            llm,
            stream: true,
            include_chat_history: query.include_chat_history,
            llm_args,
            rag_config,
            system_prompt: query.system_prompt,
            pre_prompt_query: query.pre_prompt_query,
            prompt_query: query.prompt_query,
            tags: query.tags.filter(|t| present(Some(t))),
        };
        request.into_pb(self.session_id.clone())
    }

    /// A model given by name (or `auto`) as it is; by index, the model at that place in the
    /// list the client's `get_llms()` reads.
    async fn model_name(&self, llm: Option<serde_json::Value>) -> Result<Option<String>, ApiError> {
        match llm {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(name)) => Ok(Some(name)),
            Some(serde_json::Value::Number(n)) => {
                let index = n
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "llm index {n} is not a model's place in the list"
                        ))
                    })?;
                let models = self
                    .api
                    .chat()
                    .list_models(docchat_proto::common::v1::Empty {})
                    .await?
                    .into_inner()
                    .models;
                models
                    .into_iter()
                    .nth(index)
                    .map(|m| Some(m.id))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "llm index {index} is past the end of the model list"
                        ))
                    })
            }
            Some(other) => Err(ApiError::bad_request(format!(
                "llm must be a model name or an index, not {other}"
            ))),
        }
    }

    /// The reply's events as frames. `asked` (correlation id and question) when this
    /// connection asked it: its `cx` goes first. A follower starts at `question` instead.
    async fn forward(
        &self,
        mut events: tonic::Streaming<pb::CompletionEvent>,
        asked: Option<(&str, &str)>,
        question: Option<String>,
    ) {
        let session = self.session_id.as_str();
        let username = self.api.caller().username.clone();
        let mut question_id = question.unwrap_or_default();
        loop {
            let item = tokio::select! {
                () = self.closed.cancelled() => return,
                item = events.next() => item,
            };
            let sent = match item {
                Some(Ok(pb::CompletionEvent {
                    event: Some(event), ..
                })) => match event {
                    Event::QuestionId(id) => {
                        question_id = id;
                        match asked {
                            Some((correlation, body)) => {
                                self.send(&Frame {
                                    t: "cx",
                                    session_id: session,
                                    message_id: &question_id,
                                    reply_to_id: None,
                                    body,
                                    error: None,
                                    correlation_id: Some(correlation),
                                    username: Some(&username),
                                    error_type: None,
                                })
                                .await
                            }
                            None => true,
                        }
                    }
                    Event::Delta(text) => {
                        self.send(&Frame::reply(
                            "cp",
                            session,
                            &question_id,
                            &question_id,
                            &text,
                        ))
                        .await
                    }
                    Event::Done(done) => {
                        self.send(&Frame::reply(
                            "ca",
                            session,
                            &done.message_id,
                            &question_id,
                            &done.body,
                        ))
                        .await;
                        return;
                    }
                    Event::Error(e) => {
                        let reply = e.message_id.unwrap_or_default();
                        self.send(&Frame {
                            error: Some(&e.message),
                            error_type: rate_limited(u16::try_from(e.status).unwrap_or(0)),
                            ..Frame::reply("ce", session, &reply, &question_id, "")
                        })
                        .await;
                        return;
                    }
                },
                Some(Ok(pb::CompletionEvent { event: None, .. })) => true,
                Some(Err(status)) => {
                    let error = ApiError::from(status);
                    self.stream_broke(&question_id, asked, error).await;
                    return;
                }
                None => {
                    let error = ApiError::new(
                        ErrorCode::Unavailable,
                        "the reply ended before it was finished",
                    );
                    self.stream_broke(&question_id, asked, error).await;
                    return;
                }
            };
            if !sent {
                return;
            }
        }
    }

    /// A reply stream that broke off: an error the client matches to its query.
    async fn stream_broke(&self, question_id: &str, asked: Option<(&str, &str)>, error: ApiError) {
        if question_id.is_empty() {
            let correlation = asked.map(|(c, _)| c).unwrap_or_default();
            return self.error_before_ack(correlation, error).await;
        }
        self.send(&Frame {
            error: Some(&error.message),
            error_type: rate_limited(error.code.http_status()),
            ..Frame::reply("ce", &self.session_id, "", question_id, "")
        })
        .await;
    }

    /// Follows the reply this session is still generating, if any (from where it stands:
    /// what was generated while the client was away arrives whole in the final `ca`).
    async fn follow_running(self) {
        let running = self
            .api
            .chat()
            .running_question(pb::SessionRef {
                id: self.session_id.clone(),
            })
            .await;
        let Ok(running) = running.map(tonic::Response::into_inner) else {
            return;
        };
        let Some(question_id) = running.question_id else {
            return;
        };
        let attach = pb::AttachRequest {
            question_id: question_id.clone(),
            after: running.seq,
        };
        if let Ok(events) = self.api.chat().attach(attach).await {
            self.forward(events.into_inner(), None, Some(question_id))
                .await;
        }
    }
}

/// Sends queued frames in order until the connection ends.
async fn write(
    mut socket: actix_ws::Session,
    mut rx: mpsc::Receiver<String>,
    closed: CancellationToken,
) {
    loop {
        let frame = tokio::select! {
            () = closed.cancelled() => return,
            frame = rx.recv() => frame,
        };
        let Some(frame) = frame else { return };
        match tokio::time::timeout(SEND_TIMEOUT, socket.text(frame)).await {
            Ok(Ok(())) => {}
            // Gone, or not reading: the connection ends (its replies are stored all the same).
            _ => {
                closed.cancel();
                return;
            }
        }
    }
}

/// `rate_limit` for a 429 (a rate limit, a concurrency cap, a cost cap): the client raises
/// `RateLimitError` for it.
fn rate_limited(status: u16) -> Option<&'static str> {
    (status == 429).then_some("rate_limit")
}

/// Whether an optional JSON option was really given (the client sends null, "" or "null"
/// for one it was not given).
fn present(value: Option<&serde_json::Value>) -> bool {
    match value {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::String(s)) => !s.is_empty() && s != "null",
        Some(serde_json::Value::Array(a)) => !a.is_empty(),
        Some(serde_json::Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

/// An option the client sends as a JSON string (`json.dumps(None)` is `"null"`), or as JSON.
fn json_option<T: serde::de::DeserializeOwned>(
    name: &str,
    value: Option<serde_json::Value>,
) -> Result<Option<T>, ApiError> {
    let value = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => {
            if s.is_empty() || s == "null" {
                return Ok(None);
            }
            serde_json::from_str(&s)
                .map_err(|e| ApiError::bad_request(format!("{name} is not JSON: {e}")))?
        }
        Some(other) => other,
    };
    if value.is_null() {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("invalid {name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_arrive_as_json_strings_or_json() {
        let args: Option<LlmArgs> = json_option(
            "llm_args",
            Some(serde_json::json!("{\"temperature\": 0.5}")),
        )
        .unwrap();
        assert_eq!(args.unwrap().temperature, Some(0.5));
        let none: Option<LlmArgs> =
            json_option("llm_args", Some(serde_json::json!("null"))).unwrap();
        assert!(none.is_none());
        let rag: Option<RagConfig> =
            json_option("rag_config", Some(serde_json::json!({"rag_type": "rag"}))).unwrap();
        assert_eq!(rag.unwrap().rag_type.as_deref(), Some("rag"));
        let bad = json_option::<LlmArgs>("llm_args", Some(serde_json::json!("{not json")));
        assert_eq!(bad.unwrap_err().code, ErrorCode::BadRequest);
    }

    #[test]
    fn frames_carry_every_field_the_client_requires() {
        let frame = Frame::reply("cp", "s", "q", "q", "piece");
        let v: serde_json::Value = serde_json::from_str(&frame.text()).unwrap();
        for field in [
            "t",
            "session_id",
            "message_id",
            "reply_to_id",
            "body",
            "error",
        ] {
            assert!(v.get(field).is_some(), "{field} missing from {v}");
        }
        assert!(!present(Some(&serde_json::json!(null))));
        assert!(!present(Some(&serde_json::json!("null"))));
        assert!(present(Some(&serde_json::json!(["red"]))));
    }
}
