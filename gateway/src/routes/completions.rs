//! Completions (JSON or JSON lines streamed as produced), message control, metadata,
//! references and suggested questions.

use actix_web::web::Bytes;
use actix_web::{HttpResponse, get, post, web};
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// llm_args of SPEC.md; fields the server does not use are accepted and ignored.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct LlmArgs {
    /// 0 to 2 (default 0).
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    /// Default 1536.
    #[schema(minimum = 1)]
    pub max_new_tokens: Option<u32>,
    pub use_agent: Option<bool>,
    pub memory_block_id: Option<String>,
    pub memory_block_name: Option<String>,
    /// agent_accuracy, agent_max_turns, agent_tools, agent_type, agent_total_timeout,
    /// agent_timeout, agent_stream_files, agent_max_memory_usage and any other agent_* key:
    /// passed to the agent, which validates them (400 on a bad value).
    #[serde(flatten)]
    #[schema(ignore)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl LlmArgs {
    /// The agent_* keys as one JSON object (empty when there are none).
    fn agent_args_json(&self) -> String {
        let agent: serde_json::Map<_, _> = self
            .rest
            .iter()
            .filter(|(k, _)| k.starts_with("agent_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if agent.is_empty() {
            String::new()
        } else {
            serde_json::Value::Object(agent).to_string()
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct RagConfig {
    /// auto (default), llm_only, agent_only, rag, agentic_rag, rlm_rag, fast_agentic_rag,
    /// hyde1, hyde2, rag+, all_data.
    pub rag_type: Option<String>,
    /// false: no reranker for this completion (fusion's order), when one is configured.
    pub rerank: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CompletionRequest {
    /// 1 to 200000 characters.
    #[schema(min_length = 1, max_length = 200000)]
    pub message: String,
    /// Model name or `auto`.
    pub llm: Option<String>,
    #[serde(default)]
    pub stream: bool,
    /// on, off, auto, true or false (a JSON boolean too).
    #[schema(value_type = Option<String>)]
    pub include_chat_history: Option<serde_json::Value>,
    pub llm_args: Option<LlmArgs>,
    pub rag_config: Option<RagConfig>,
    /// Instructions for this completion: a system message after docchat's own.
    pub system_prompt: Option<String>,
    /// What stands before the document excerpts in a RAG prompt, instead of docchat's
    /// instructions.
    pub pre_prompt_query: Option<String>,
    /// Put before the question in the prompt (the stored question stays as asked).
    pub prompt_query: Option<String>,
    /// Which documents RAG reads: a list of tags (documents tagged with any), or
    /// `{"include": [...], "exclude": [...], "document_ids": [...]}` (document ids, when
    /// given, name the documents and the tags are ignored).
    #[schema(value_type = Option<Object>)]
    pub tags: Option<serde_json::Value>,
}

/// The documents a completion's RAG reads (the client's `tags`).
#[derive(Debug, Default)]
pub(crate) struct TagScope {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub document_ids: Vec<String>,
}

/// The client's `tags` (a list, or a TagFilter object) as a [`TagScope`].
pub(crate) fn tag_scope(tags: Option<serde_json::Value>) -> Result<TagScope, ApiError> {
    use serde_json::Value;
    let strings = |v: Option<Value>, what: &str| -> Result<Vec<String>, ApiError> {
        match v {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s),
                    other => Err(ApiError::bad_request(format!(
                        "{what} must be strings, not {other}"
                    ))),
                })
                .collect(),
            Some(other) => Err(ApiError::bad_request(format!(
                "{what} must be a list of strings, not {other}"
            ))),
        }
    };
    match tags {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(list @ Value::Array(_)) => Ok(TagScope {
            include: strings(Some(list), "tags")?,
            ..TagScope::default()
        }),
        Some(Value::Object(mut filter)) => {
            if let Some(unknown) = filter
                .keys()
                .find(|k| !matches!(k.as_str(), "include" | "exclude" | "document_ids"))
            {
                return Err(ApiError::bad_request(format!(
                    "tags takes include, exclude and document_ids, not {unknown}"
                )));
            }
            Ok(TagScope {
                include: strings(filter.remove("include"), "tags.include")?,
                exclude: strings(filter.remove("exclude"), "tags.exclude")?,
                document_ids: strings(filter.remove("document_ids"), "tags.document_ids")?,
            })
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "tags must be a list of tags or {{include, exclude, document_ids}}, not {other}"
        ))),
    }
}

impl CompletionRequest {
    /// The request as chat-service takes it, for the chat session `session_id` (REST's
    /// completions and the client's WebSocket both come this way).
    pub(crate) fn into_pb(self, session_id: String) -> Result<pb::CompletionRequest, ApiError> {
        let CompletionRequest {
            message,
            llm,
            stream: _,
            include_chat_history,
            llm_args,
            rag_config,
            system_prompt,
            pre_prompt_query,
            prompt_query,
            tags,
        } = self;
        let scope = tag_scope(tags)?;
        let args = llm_args.unwrap_or_default();
        let agent_args_json = args.agent_args_json();
        let rag_config = rag_config.unwrap_or_default();
        Ok(pb::CompletionRequest {
            session_id,
            message,
            llm: llm.unwrap_or_default(),
            include_chat_history: history_flag(include_chat_history)?,
            temperature: args.temperature,
            max_new_tokens: args.max_new_tokens,
            use_agent: args.use_agent.unwrap_or(false),
            memory_block_id: args.memory_block_id,
            memory_block_name: args.memory_block_name,
            rag_type: rag_config.rag_type.unwrap_or_default(),
            agent_args_json,
            system_prompt: system_prompt.filter(|s| !s.trim().is_empty() && s != "auto"),
            rerank: rag_config.rerank,
            pre_prompt_query,
            prompt_query,
            include_tags: scope.include,
            exclude_tags: scope.exclude,
            document_ids: scope.document_ids,
        })
    }
}

/// The non-streaming answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompletionResult {
    /// The reply's message id.
    pub message_id: String,
    pub body: String,
}

/// One line of a streamed answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct StreamLine {
    /// The line's number in the reply's stream (1 the question id line, then the text, then
    /// the final line): `GET /messages/{question_id}/stream?after=` answers the lines after
    /// one.
    pub seq: u64,
    /// The next piece of the reply (empty on the first and last lines).
    pub body: String,
    pub finished: bool,
    /// The reply's id, on the last line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The question's id (what the control calls take), on the first line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question_id: Option<String>,
    /// Why generation failed, on a failing last line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StreamLine {
    fn bytes(&self) -> Bytes {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    fn of(event: Event, seq: u64) -> StreamLine {
        let mut line = StreamLine {
            seq,
            body: String::new(),
            finished: false,
            message_id: None,
            question_id: None,
            error: None,
        };
        match event {
            Event::QuestionId(id) => line.question_id = Some(id),
            Event::Delta(text) => line.body = text,
            Event::Done(done) => {
                line.finished = true;
                line.message_id = Some(done.message_id);
            }
            Event::Error(e) => {
                line.finished = true;
                line.message_id = e.message_id;
                line.error = Some(e.message);
            }
        }
        line
    }
}

/// A reply's events as JSON lines, each with its seq; a broken stream ends with an error
/// line numbered after the last one.
fn jsonl(events: tonic::Streaming<pb::CompletionEvent>) -> HttpResponse {
    let mut last = 0;
    let lines = events.map(move |item| {
        let line = match item {
            Ok(pb::CompletionEvent {
                event: Some(e),
                seq,
            }) => {
                last = seq;
                StreamLine::of(e, seq)
            }
            Ok(pb::CompletionEvent { event: None, .. }) => return Ok(Bytes::new()),
            Err(status) => {
                let error = ApiError::from(status);
                last += 1;
                StreamLine::of(
                    Event::Error(pb::CompletionError {
                        message: error.message,
                        message_id: None,
                        status: u32::from(error.code.http_status()),
                    }),
                    last,
                )
            }
        };
        Ok::<_, actix_web::Error>(line.bytes())
    });
    HttpResponse::Ok()
        .content_type("application/jsonl")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(lines)
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_completion)
        .service(stream_message)
        .service(list_questions_for_chat_session)
        .service(control_message)
        .service(get_message_meta)
        .service(get_message_references);
}

fn history_flag(value: Option<serde_json::Value>) -> Result<String, ApiError> {
    Ok(match value {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::Bool(b)) => b.to_string(),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "include_chat_history must be on, off, auto, true or false, not {other}"
            )));
        }
    })
}

#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    request_body = CompletionRequest,
    responses(
        (status = 200, description = "stream false: the reply (application/json); stream true: JSON lines (application/jsonl), one StreamLine each as the reply is generated: the first carries question_id, the last finished true with message_id, or error",
            content((CompletionResult = "application/json"), (StreamLine = "application/jsonl"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)
    ),
    security(("bearer" = []))
)]
#[post("/chats/{session_id}/completions")]
pub async fn get_completion(
    api: Api,
    path: web::Path<String>,
    body: web::Json<CompletionRequest>,
) -> HttpResult<HttpResponse> {
    let body = body.into_inner();
    let stream = body.stream;
    let request = body.into_pb(path.into_inner())?;
    let mut events = api.chat().complete(request).await?.into_inner();
    if stream {
        return Ok(jsonl(events));
    }
    let mut body = String::new();
    while let Some(item) = events.next().await {
        match item?.event {
            Some(Event::Delta(text)) => body.push_str(&text),
            Some(Event::Done(done)) => {
                return Ok(HttpResponse::Ok().json(CompletionResult {
                    message_id: done.message_id,
                    body: done.body,
                }));
            }
            Some(Event::Error(e)) => {
                // The cause's status (the model's 429, its timeout's 504, a broken
                // upstream's 502 …); 503 when the service named none.
                let code = u16::try_from(e.status)
                    .ok()
                    .and_then(ErrorCode::from_http)
                    .unwrap_or(ErrorCode::Unavailable);
                return Err(ApiError::new(code, e.message).into());
            }
            Some(Event::QuestionId(_)) | None => {}
        }
    }
    Err(ApiError::new(
        ErrorCode::Unavailable,
        "the reply ended before it was finished",
    )
    .into())
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct StreamQuery {
    /// The last `seq` the client has (default 0: every line).
    pub after: Option<u64>,
}

#[utoipa::path(
    tag = "Chat",
    params(("question_id" = String, Path), StreamQuery),
    responses(
        (status = 200, description = "JSON lines (StreamLine) of the question's reply after `after`: those already generated, then the live ones as they are generated, then the final line (finished true with message_id, or error) — from any replica; a stored reply replays whole from its stored text at any time. Closing this stream stops nothing (stop does)",
            content((StreamLine = "application/jsonl"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "not the caller's question", body = ErrorBody)
    ),
    security(("bearer" = []))
)]
#[get("/messages/{question_id}/stream")]
pub async fn stream_message(
    api: Api,
    path: web::Path<String>,
    query: web::Query<StreamQuery>,
) -> HttpResult<HttpResponse> {
    let request = pb::AttachRequest {
        question_id: path.into_inner(),
        after: query.into_inner().after.unwrap_or(0),
    };
    let events = api.chat().attach(request).await?.into_inner();
    Ok(jsonl(events))
}

#[utoipa::path(
    tag = "Chat",
    params(("question_id" = String, Path), ("action" = String, Path, description = "pause, resume, stop or finish")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/messages/{question_id}/{action}")]
pub async fn control_message(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (question_id, action) = path.into_inner();
    if !matches!(action.as_str(), "pause" | "resume" | "stop" | "finish") {
        return Err(ApiError::not_found(format!("no such action: {action}")).into());
    }
    let request = pb::ControlRequest {
        question_id,
        action,
    };
    api.chat().control_message(request).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct MetaQuery {
    /// usage_stats, prompt_raw, retrieval_trace (how a RAG reply's excerpts were found:
    /// the queries, the candidates with their lexical, dense, fused and reranked scores and
    /// ranks, what the prompt kept, each stage's time), or an agent_* type.
    pub info_type: Option<String>,
}

/// A metadata entry of a reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageMeta {
    pub message_type: String,
    pub content: String,
}

#[utoipa::path(
    tag = "Chat",
    params(("message_id" = String, Path), MetaQuery),
    responses((status = 200, body = Vec<MessageMeta>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/messages/{message_id}/meta")]
pub async fn get_message_meta(
    api: Api,
    path: web::Path<String>,
    query: web::Query<MetaQuery>,
) -> HttpResult<web::Json<Vec<MessageMeta>>> {
    let request = pb::MessageMetaRequest {
        message_id: path.into_inner(),
        info_type: query.into_inner().info_type.unwrap_or_default(),
    };
    let list = api.chat().get_message_meta(request).await?.into_inner();
    Ok(web::Json(
        list.entries
            .into_iter()
            .map(|m| MessageMeta {
                message_type: m.message_type,
                content: m.content,
            })
            .collect(),
    ))
}

/// A document excerpt a reply was answered from.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageReference {
    pub document_id: String,
    pub document_name: String,
    pub chunk_id: i64,
    /// Page numbers, comma-separated (the client reads a string).
    pub pages: String,
    pub score: f64,
    pub collection_id: String,
    pub content: String,
    pub were_references_deleted: bool,
}

#[utoipa::path(
    tag = "Chat",
    params(("message_id" = String, Path)),
    responses((status = 200, body = Vec<MessageReference>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/messages/{message_id}/references")]
pub async fn get_message_references(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<MessageReference>>> {
    let id = path.into_inner();
    let list = api.chat().list_references(pb::MessageRef { id }).await?;
    Ok(web::Json(
        list.into_inner()
            .references
            .into_iter()
            .map(|r| MessageReference {
                document_id: r.document_id,
                document_name: r.document_name,
                chunk_id: r.chunk_id,
                pages: r
                    .pages
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                score: r.score,
                collection_id: r.collection_id,
                content: r.content,
                were_references_deleted: r.were_references_deleted,
            })
            .collect(),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct QuestionsQuery {
    /// Suggestions to return (default 5, at most 20).
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SuggestedQuestion {
    pub question: String,
}

#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path), QuestionsQuery),
    responses((status = 200, body = Vec<SuggestedQuestion>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/chats/{session_id}/questions")]
pub async fn list_questions_for_chat_session(
    api: Api,
    path: web::Path<String>,
    query: web::Query<QuestionsQuery>,
) -> HttpResult<web::Json<Vec<SuggestedQuestion>>> {
    let request = pb::SuggestQuestionsRequest {
        session_id: path.into_inner(),
        limit: query.into_inner().limit.unwrap_or(0),
    };
    let list = api.chat().suggest_questions(request).await?.into_inner();
    Ok(web::Json(
        list.questions
            .into_iter()
            .map(|question| SuggestedQuestion { question })
            .collect(),
    ))
}
