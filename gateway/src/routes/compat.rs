//! `/compat_api/v1`: the chat-completions, responses and models endpoints of the
//! OpenAI-style vendor API, over chat-service's stateless `CompatComplete`/`CompatStream`.
//!
//! Everything here speaks the vendor's shapes, errors included
//! (`{"error": {"message", "type", "param", "code"}}`), because the callers are that vendor's
//! SDKs. Streams are Server-Sent Events written as chat-service yields each piece.

use std::future::Future;
use std::pin::Pin;

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, dev::Payload};
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::compat_chunk::Kind;
use docchat_proto::common::v1::Empty;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::auth::Api;

// ---------------------------------------------------------------------------------------
// Errors and auth

/// An error in the vendor's shape.
#[derive(Debug)]
pub struct CompatError {
    status: u16,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
}

impl CompatError {
    fn invalid(message: impl Into<String>) -> CompatError {
        CompatError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: None,
            code: None,
        }
    }

    fn param(mut self, param: &'static str) -> CompatError {
        self.param = Some(param);
        self
    }

    /// The `error` object, also sent as a stream's last event.
    fn body(&self) -> ErrorObject<'_> {
        ErrorObject {
            message: &self.message,
            kind: self.kind,
            param: self.param,
            code: self.code,
        }
    }
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorObject<'a>,
}

impl std::fmt::Display for CompatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message.fmt(f)
    }
}

impl ResponseError for CompatError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(ErrorBody { error: self.body() })
    }
}

impl From<ApiError> for CompatError {
    fn from(e: ApiError) -> CompatError {
        let status = e.code.http_status();
        let (kind, param, code) = match e.code {
            // The compat RPCs answer NOT_FOUND for one thing only: the model.
            ErrorCode::NotFound => (
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
            ErrorCode::Unauthenticated => ("invalid_request_error", None, Some("invalid_api_key")),
            ErrorCode::Forbidden => ("permission_error", None, None),
            ErrorCode::TooManyRequests => ("rate_limit_error", None, Some("rate_limit_exceeded")),
            ErrorCode::Internal | ErrorCode::Unavailable => ("server_error", None, None),
            _ => ("invalid_request_error", None, None),
        };
        CompatError {
            status,
            message: e.message,
            kind,
            param,
            code,
        }
    }
}

impl From<crate::error::HttpError> for CompatError {
    fn from(e: crate::error::HttpError) -> CompatError {
        e.0.into()
    }
}

impl From<tonic::Status> for CompatError {
    fn from(status: tonic::Status) -> CompatError {
        let err = ApiError::from_status(&status);
        if matches!(err.code, ErrorCode::Internal | ErrorCode::Unavailable) {
            tracing::error!(code = ?status.code(), message = status.message(), "compat call failed");
        }
        err.into()
    }
}

type CompatResult<T> = Result<T, CompatError>;

/// The caller of a compat request and its service clients; a bad key answers in the
/// vendor's shape.
pub struct CompatApi(Api);

impl FromRequest for CompatApi {
    type Error = CompatError;
    type Future = Pin<Box<dyn Future<Output = Result<CompatApi, CompatError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let api = Api::from_request(req, payload);
        Box::pin(async move { Ok(CompatApi(api.await?)) })
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> CompatResult<T> {
    serde_json::from_slice(body)
        .map_err(|e| CompatError::invalid(format!("invalid JSON body: {e}")))
}

fn unix_now() -> i64 {
    docchat_common::time::now().timestamp()
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

fn sse() -> actix_web::HttpResponseBuilder {
    let mut builder = HttpResponse::Ok();
    builder
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-accel-buffering", "no"));
    builder
}

/// Starts a streamed call: the first chunk (`start`, the resolved model) is awaited here,
/// so an unknown model or a refused call is an HTTP error rather than a broken stream.
async fn open_stream(
    api: &Api,
    request: pb::CompatRequest,
) -> CompatResult<(String, tonic::Streaming<pb::CompatChunk>)> {
    let mut chunks = api.chat().compat_stream(request).await?.into_inner();
    match chunks.message().await? {
        Some(pb::CompatChunk {
            kind: Some(Kind::Start(model)),
        }) => Ok((model, chunks)),
        _ => Err(ApiError::new(ErrorCode::Unavailable, "the model stream did not start").into()),
    }
}

// ---------------------------------------------------------------------------------------
// POST /chat/completions

#[derive(Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<ChatMessageIn>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u32>,
    /// The vendor's newer name for `max_tokens`.
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct ChatMessageIn {
    role: String,
    /// Absent or null on an assistant turn that only called tools.
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    image_url: Option<ImageUrl>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ImageUrl {
    Object { url: String },
    Url(String),
}

/// The vendor's messages as chat-service's: `developer` is a system message, text parts are
/// joined, image parts become image URLs; audio and file parts are refused.
fn chat_messages(messages: Vec<ChatMessageIn>) -> CompatResult<Vec<pb::CompatMessage>> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "developer" | "system" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return Err(CompatError::invalid(format!(
                    "messages[{i}].role {other:?} is not supported: use developer, system, user or assistant"
                ))
                .param("messages"));
            }
        };
        let mut text = String::new();
        let mut image_urls = Vec::new();
        match m.content {
            None => {}
            Some(Content::Text(t)) => text = t,
            Some(Content::Parts(parts)) => {
                for (j, part) in parts.into_iter().enumerate() {
                    match part.kind.as_str() {
                        "text" | "input_text" | "output_text" | "refusal" => {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(part.text.as_deref().unwrap_or_default());
                        }
                        "image_url" => match part.image_url {
                            Some(ImageUrl::Object { url } | ImageUrl::Url(url)) => {
                                image_urls.push(url)
                            }
                            None => {
                                return Err(CompatError::invalid(format!(
                                    "messages[{i}].content[{j}] is an image_url part without image_url.url"
                                ))
                                .param("messages"));
                            }
                        },
                        "input_audio" | "file" => {
                            return Err(CompatError::invalid(format!(
                                "messages[{i}].content[{j}]: {} parts are not supported; send text or image_url parts",
                                part.kind
                            ))
                            .param("messages"));
                        }
                        other => {
                            return Err(CompatError::invalid(format!(
                                "messages[{i}].content[{j}]: unknown content part type {other:?}"
                            ))
                            .param("messages"));
                        }
                    }
                }
            }
        }
        out.push(pb::CompatMessage {
            role: role.to_owned(),
            text,
            image_urls,
        });
    }
    Ok(out)
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl Usage {
    fn of(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }
}

#[derive(Serialize)]
struct ChatCompletion<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: [ChatChoice<'a>; 1],
    usage: Usage,
}

#[derive(Serialize)]
struct ChatChoice<'a> {
    index: u32,
    message: MessageOut<'a>,
    finish_reason: &'a str,
    logprobs: Option<()>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: &'a str,
    refusal: Option<()>,
}

#[derive(Serialize)]
struct ChatChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: &'a [ChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    finish_reason: Option<&'a str>,
    logprobs: Option<()>,
}

#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

/// One `data:` event.
fn data_event(value: &impl Serialize) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"data: ");
    // Serializing plain structs cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The chunks of a streamed chat completion.
struct ChunkWriter {
    id: String,
    created: i64,
    model: String,
}

impl ChunkWriter {
    fn chunk(&self, delta: Delta<'_>, finish_reason: Option<&str>) -> Bytes {
        data_event(&ChatChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: &[ChunkChoice {
                index: 0,
                delta,
                finish_reason,
                logprobs: None,
            }],
            usage: None,
        })
    }

    fn usage(&self, done: &pb::CompatReply) -> Bytes {
        data_event(&ChatChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: &[],
            usage: Some(Usage::of(done.prompt_tokens, done.completion_tokens)),
        })
    }
}

const DONE: &[u8] = b"data: [DONE]\n\n";

pub async fn chat_completions(
    CompatApi(api): CompatApi,
    body: Bytes,
) -> CompatResult<HttpResponse> {
    let r: ChatRequest = parse(&body)?;
    let stream = r.stream.unwrap_or(false);
    let include_usage = r
        .stream_options
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    let request = pb::CompatRequest {
        model: r.model,
        messages: chat_messages(r.messages)?,
        temperature: r.temperature,
        max_tokens: r.max_completion_tokens.or(r.max_tokens),
        purpose: "compat.chat".into(),
    };
    let id = new_id("chatcmpl-");
    let created = unix_now();
    if !stream {
        let reply = api.chat().compat_complete(request).await?.into_inner();
        let body = serde_json::to_vec(&ChatCompletion {
            id: &id,
            object: "chat.completion",
            created,
            model: &reply.model,
            choices: [ChatChoice {
                index: 0,
                message: MessageOut {
                    role: "assistant",
                    content: &reply.text,
                    refusal: None,
                },
                finish_reason: &reply.finish_reason,
                logprobs: None,
            }],
            usage: Usage::of(reply.prompt_tokens, reply.completion_tokens),
        })
        .map_err(|e| ApiError::internal("compat answer", e))?;
        return Ok(HttpResponse::Ok()
            .content_type("application/json")
            .body(body));
    }
    let (model, chunks) = open_stream(&api, request).await?;
    let writer = ChunkWriter { id, created, model };
    let first = writer.chunk(
        Delta {
            role: Some("assistant"),
            content: Some(""),
        },
        None,
    );
    let rest = chunks.flat_map(move |item| {
        let events: Vec<Bytes> = match item {
            Ok(pb::CompatChunk {
                kind: Some(Kind::Delta(text)),
            }) => vec![writer.chunk(
                Delta {
                    role: None,
                    content: Some(&text),
                },
                None,
            )],
            Ok(pb::CompatChunk {
                kind: Some(Kind::Done(done)),
            }) => {
                let mut out = vec![writer.chunk(Delta::default(), Some(&done.finish_reason))];
                if include_usage {
                    out.push(writer.usage(&done));
                }
                out.push(Bytes::from_static(DONE));
                out
            }
            Ok(_) => Vec::new(),
            Err(status) => {
                let err = CompatError::from(status);
                vec![data_event(&ErrorBody { error: err.body() })]
            }
        };
        futures::stream::iter(events.into_iter().map(Ok::<_, actix_web::Error>))
    });
    let events = futures::stream::once(async move { Ok::<_, actix_web::Error>(first) }).chain(rest);
    Ok(sse().streaming(events))
}

// ---------------------------------------------------------------------------------------
// POST /responses

#[derive(Deserialize)]
struct ResponsesRequest {
    model: String,
    input: Input,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<InputItem>),
}

#[derive(Deserialize)]
struct InputItem {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<ItemContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ItemContent {
    Text(String),
    Parts(Vec<Part>),
}

/// The responses input as messages: only text (the spec: no files, images or base64).
fn response_messages(
    instructions: Option<String>,
    input: Input,
) -> CompatResult<Vec<pb::CompatMessage>> {
    let text_message = |role: &str, text: String| pb::CompatMessage {
        role: role.to_owned(),
        text,
        image_urls: Vec::new(),
    };
    let mut out = Vec::new();
    if let Some(instructions) = instructions.filter(|s| !s.is_empty()) {
        out.push(text_message("system", instructions));
    }
    match input {
        Input::Text(text) => out.push(text_message("user", text)),
        Input::Items(items) => {
            for (i, item) in items.into_iter().enumerate() {
                if let Some(kind) = item.kind.as_deref().filter(|k| *k != "message") {
                    return Err(CompatError::invalid(format!(
                        "input[{i}]: items of type {kind:?} are not supported; send messages with role and content"
                    ))
                    .param("input"));
                }
                let role = match item.role.as_deref() {
                    Some("developer" | "system") => "system",
                    Some("user") => "user",
                    Some("assistant") => "assistant",
                    other => {
                        return Err(CompatError::invalid(format!(
                            "input[{i}].role {other:?} is not supported: use developer, system, user or assistant"
                        ))
                        .param("input"));
                    }
                };
                let text = match item.content {
                    None => String::new(),
                    Some(ItemContent::Text(t)) => t,
                    Some(ItemContent::Parts(parts)) => {
                        let mut text = String::new();
                        for (j, part) in parts.into_iter().enumerate() {
                            match part.kind.as_str() {
                                "input_text" | "output_text" | "text" => {
                                    if !text.is_empty() {
                                        text.push('\n');
                                    }
                                    text.push_str(part.text.as_deref().unwrap_or_default());
                                }
                                other => {
                                    return Err(CompatError::invalid(format!(
                                        "input[{i}].content[{j}]: {other} parts are not supported; the responses API here takes text only"
                                    ))
                                    .param("input"));
                                }
                            }
                        }
                        text
                    }
                };
                out.push(text_message(role, text));
            }
        }
    }
    Ok(out)
}

/// What a response object needs besides its output.
struct ResponseHead {
    id: String,
    created_at: i64,
    model: String,
    instructions: Option<String>,
    temperature: Option<f64>,
    max_output_tokens: Option<u32>,
    /// The caller's metadata, echoed (`{}` when none was sent).
    metadata: serde_json::Value,
    message_id: String,
}

#[derive(Serialize)]
struct ResponseObject<'a> {
    id: &'a str,
    object: &'static str,
    created_at: i64,
    model: &'a str,
    status: &'a str,
    error: Option<()>,
    incomplete_details: Option<IncompleteDetails>,
    instructions: Option<&'a str>,
    max_output_tokens: Option<u32>,
    output: Vec<OutputMessage<'a>>,
    parallel_tool_calls: bool,
    temperature: Option<f64>,
    tool_choice: &'static str,
    tools: [(); 0],
    top_p: Option<f64>,
    truncation: &'static str,
    text: TextConfig,
    metadata: &'a serde_json::Value,
    usage: Option<ResponseUsage>,
}

#[derive(Serialize)]
struct IncompleteDetails {
    reason: &'static str,
}

#[derive(Serialize)]
struct TextConfig {
    format: TextFormat,
}

#[derive(Serialize)]
struct TextFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct OutputMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    status: &'a str,
    content: Vec<OutputText<'a>>,
}

#[derive(Serialize)]
struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    annotations: [(); 0],
    logprobs: [(); 0],
}

impl<'a> OutputText<'a> {
    fn of(text: &'a str) -> OutputText<'a> {
        OutputText {
            kind: "output_text",
            text,
            annotations: [],
            logprobs: [],
        }
    }
}

#[derive(Serialize)]
struct ResponseUsage {
    input_tokens: u64,
    input_tokens_details: CachedTokens,
    output_tokens: u64,
    output_tokens_details: ReasoningTokens,
    total_tokens: u64,
}

#[derive(Serialize)]
struct CachedTokens {
    cached_tokens: u64,
}

#[derive(Serialize)]
struct ReasoningTokens {
    reasoning_tokens: u64,
}

impl ResponseUsage {
    fn of(done: &pb::CompatReply) -> ResponseUsage {
        ResponseUsage {
            input_tokens: done.prompt_tokens,
            input_tokens_details: CachedTokens { cached_tokens: 0 },
            output_tokens: done.completion_tokens,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: 0,
            },
            total_tokens: done.prompt_tokens + done.completion_tokens,
        }
    }
}

impl ResponseHead {
    /// The response object: in progress (`done` None, no output yet), or finished with
    /// `text` (`incomplete` when the model hit its token limit).
    fn object<'a>(&'a self, text: &'a str, done: Option<&pb::CompatReply>) -> ResponseObject<'a> {
        let (status, incomplete_details) = match done {
            None => ("in_progress", None),
            Some(d) if d.finish_reason == "length" => (
                "incomplete",
                Some(IncompleteDetails {
                    reason: "max_output_tokens",
                }),
            ),
            Some(_) => ("completed", None),
        };
        let output = match done {
            None => Vec::new(),
            Some(_) => vec![self.message(status, vec![OutputText::of(text)])],
        };
        ResponseObject {
            id: &self.id,
            object: "response",
            created_at: self.created_at,
            model: &self.model,
            status,
            error: None,
            incomplete_details,
            instructions: self.instructions.as_deref(),
            max_output_tokens: self.max_output_tokens,
            output,
            parallel_tool_calls: false,
            temperature: self.temperature,
            tool_choice: "auto",
            tools: [],
            top_p: None,
            truncation: "disabled",
            text: TextConfig {
                format: TextFormat { kind: "text" },
            },
            metadata: &self.metadata,
            usage: done.map(ResponseUsage::of),
        }
    }

    fn message<'a>(&'a self, status: &'a str, content: Vec<OutputText<'a>>) -> OutputMessage<'a> {
        OutputMessage {
            id: &self.message_id,
            kind: "message",
            role: "assistant",
            status,
            content,
        }
    }
}

/// The events of a streamed response, numbered in order.
struct EventWriter {
    head: ResponseHead,
    sequence: u64,
    text: String,
}

impl EventWriter {
    fn event(
        &mut self,
        kind: &str,
        mut fields: serde_json::Map<String, serde_json::Value>,
    ) -> Bytes {
        fields.insert("type".into(), kind.into());
        fields.insert("sequence_number".into(), self.sequence.into());
        self.sequence += 1;
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        let _ = serde_json::to_writer(&mut out, &fields);
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }

    fn with(pairs: Vec<(&str, serde_json::Value)>) -> serde_json::Map<String, serde_json::Value> {
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    fn value(v: impl Serialize) -> serde_json::Value {
        serde_json::to_value(v).unwrap_or_default()
    }

    /// response.created … response.content_part.added.
    fn opening(&mut self) -> Vec<Bytes> {
        let response = Self::value(self.head.object("", None));
        let item = Self::value(self.head.message("in_progress", Vec::new()));
        let id = self.head.message_id.clone();
        vec![
            self.event(
                "response.created",
                Self::with(vec![("response", response.clone())]),
            ),
            self.event(
                "response.in_progress",
                Self::with(vec![("response", response)]),
            ),
            self.event(
                "response.output_item.added",
                Self::with(vec![("output_index", 0.into()), ("item", item)]),
            ),
            self.event(
                "response.content_part.added",
                Self::with(vec![
                    ("item_id", id.into()),
                    ("output_index", 0.into()),
                    ("content_index", 0.into()),
                    ("part", Self::value(OutputText::of(""))),
                ]),
            ),
        ]
    }

    fn delta(&mut self, delta: String) -> Bytes {
        self.text.push_str(&delta);
        let id = self.head.message_id.clone();
        self.event(
            "response.output_text.delta",
            Self::with(vec![
                ("item_id", id.into()),
                ("output_index", 0.into()),
                ("content_index", 0.into()),
                ("delta", delta.into()),
                ("logprobs", serde_json::Value::Array(Vec::new())),
            ]),
        )
    }

    /// response.output_text.done … response.completed (or response.incomplete).
    fn closing(&mut self, done: &pb::CompatReply) -> Vec<Bytes> {
        let text = std::mem::take(&mut self.text);
        let response = Self::value(self.head.object(&text, Some(done)));
        let status = response["status"]
            .as_str()
            .unwrap_or("completed")
            .to_owned();
        let item = Self::value(self.head.message(&status, vec![OutputText::of(&text)]));
        let id = self.head.message_id.clone();
        let last = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        vec![
            self.event(
                "response.output_text.done",
                Self::with(vec![
                    ("item_id", id.clone().into()),
                    ("output_index", 0.into()),
                    ("content_index", 0.into()),
                    ("text", text.clone().into()),
                    ("logprobs", serde_json::Value::Array(Vec::new())),
                ]),
            ),
            self.event(
                "response.content_part.done",
                Self::with(vec![
                    ("item_id", id.into()),
                    ("output_index", 0.into()),
                    ("content_index", 0.into()),
                    ("part", Self::value(OutputText::of(&text))),
                ]),
            ),
            self.event(
                "response.output_item.done",
                Self::with(vec![("output_index", 0.into()), ("item", item)]),
            ),
            self.event(last, Self::with(vec![("response", response)])),
        ]
    }

    fn error(&mut self, err: &CompatError) -> Bytes {
        self.event(
            "error",
            Self::with(vec![
                ("code", err.code.unwrap_or(err.kind).into()),
                ("message", err.message.clone().into()),
                ("param", err.param.into()),
            ]),
        )
    }
}

pub async fn responses(CompatApi(api): CompatApi, body: Bytes) -> CompatResult<HttpResponse> {
    let r: ResponsesRequest = parse(&body)?;
    let stream = r.stream.unwrap_or(false);
    let request = pb::CompatRequest {
        model: r.model,
        messages: response_messages(r.instructions.clone(), r.input)?,
        temperature: r.temperature,
        max_tokens: r.max_output_tokens,
        purpose: "compat.responses".into(),
    };
    let mut head = ResponseHead {
        id: new_id("resp_"),
        created_at: unix_now(),
        model: String::new(),
        instructions: r.instructions,
        temperature: r.temperature,
        max_output_tokens: r.max_output_tokens,
        metadata: r
            .metadata
            .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
        message_id: new_id("msg_"),
    };
    if !stream {
        let reply = api.chat().compat_complete(request).await?.into_inner();
        head.model = reply.model.clone();
        let body = serde_json::to_vec(&head.object(&reply.text, Some(&reply)))
            .map_err(|e| ApiError::internal("compat answer", e))?;
        return Ok(HttpResponse::Ok()
            .content_type("application/json")
            .body(body));
    }
    let (model, chunks) = open_stream(&api, request).await?;
    head.model = model;
    let mut writer = EventWriter {
        head,
        sequence: 0,
        text: String::new(),
    };
    let opening = writer.opening();
    let rest = chunks.flat_map(move |item| {
        let w = &mut writer;
        let events = match item {
            Ok(pb::CompatChunk {
                kind: Some(Kind::Delta(text)),
            }) => vec![w.delta(text)],
            Ok(pb::CompatChunk {
                kind: Some(Kind::Done(done)),
            }) => w.closing(&done),
            Ok(_) => Vec::new(),
            Err(status) => vec![w.error(&CompatError::from(status))],
        };
        futures::stream::iter(events.into_iter().map(Ok::<_, actix_web::Error>))
    });
    let events = futures::stream::iter(opening.into_iter().map(Ok)).chain(rest);
    Ok(sse().streaming(events))
}

// ---------------------------------------------------------------------------------------
// GET /models

#[derive(Serialize)]
struct ModelList {
    object: &'static str,
    data: Vec<ModelObject>,
}

#[derive(Serialize)]
struct ModelObject {
    id: String,
    object: &'static str,
    created: i64,
    owned_by: &'static str,
    permission: [Permission; 1],
    root: String,
    parent: Option<String>,
    /// Extension: the provider's model id.
    base_model: String,
}

#[derive(Serialize)]
struct Permission {
    id: String,
    object: &'static str,
    created: i64,
    allow_create_engine: bool,
    allow_sampling: bool,
    allow_logprobs: bool,
    allow_search_indices: bool,
    allow_view: bool,
    allow_fine_tuning: bool,
    organization: &'static str,
    group: Option<String>,
    is_blocking: bool,
}

pub async fn models(CompatApi(api): CompatApi) -> CompatResult<HttpResponse> {
    let list = api.chat().list_models(Empty {}).await?.into_inner();
    let created = list.loaded_at;
    let data = list
        .models
        .into_iter()
        .map(|m| ModelObject {
            permission: [Permission {
                id: format!("modelperm-{}", m.id),
                object: "model_permission",
                created,
                allow_create_engine: false,
                allow_sampling: true,
                allow_logprobs: false,
                allow_search_indices: false,
                allow_view: true,
                allow_fine_tuning: false,
                organization: "*",
                group: None,
                is_blocking: false,
            }],
            root: m.id.clone(),
            id: m.id,
            object: "model",
            created,
            owned_by: "docchat",
            parent: None,
            base_model: m.base_model,
        })
        .collect();
    Ok(HttpResponse::Ok().json(ModelList {
        object: "list",
        data,
    }))
}

/// Any other path under `/compat_api/v1`.
pub async fn unknown(req: HttpRequest, _api: CompatApi) -> CompatResult<HttpResponse> {
    Err(CompatError {
        status: 404,
        message: format!("no route for {} {}", req.method(), req.path()),
        kind: "invalid_request_error",
        param: None,
        code: Some("unknown_url"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_messages_map_roles_and_parts() {
        let messages: Vec<ChatMessageIn> = serde_json::from_str(
            r#"[
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is"},
                    {"type": "text", "text": "this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}}
                ]},
                {"role": "assistant", "content": null, "tool_calls": []}
            ]"#,
        )
        .unwrap();
        let out = chat_messages(messages).unwrap();
        assert_eq!(out[0].role, "system");
        assert_eq!(out[1].text, "what is\nthis?");
        assert_eq!(out[1].image_urls, vec!["data:image/png;base64,AA"]);
        assert_eq!(out[2].text, "");
    }

    #[test]
    fn audio_file_and_unknown_roles_are_refused() {
        for body in [
            r#"[{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]"#,
            r#"[{"role": "user", "content": [{"type": "file", "file": {"file_id": "x"}}]}]"#,
            r#"[{"role": "tool", "content": "42", "tool_call_id": "c"}]"#,
        ] {
            let messages: Vec<ChatMessageIn> = serde_json::from_str(body).unwrap();
            let err = chat_messages(messages).unwrap_err();
            assert_eq!(err.status, 400);
            assert_eq!(err.param, Some("messages"));
        }
    }

    #[test]
    fn responses_input_is_text_only() {
        let input: Input = serde_json::from_str(
            r#"[{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "message", "role": "assistant", "content": "hello"}]"#,
        )
        .unwrap();
        let out = response_messages(Some("be kind".into()), input).unwrap();
        assert_eq!(
            out.iter()
                .map(|m| (m.role.as_str(), m.text.as_str()))
                .collect::<Vec<_>>(),
            [
                ("system", "be kind"),
                ("user", "hi"),
                ("assistant", "hello")
            ]
        );
        let image: Input = serde_json::from_str(
            r#"[{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]"#,
        )
        .unwrap();
        assert_eq!(response_messages(None, image).unwrap_err().status, 400);
        let call: Input = serde_json::from_str(
            r#"[{"type": "function_call_output", "call_id": "c", "output": "1"}]"#,
        )
        .unwrap();
        assert_eq!(response_messages(None, call).unwrap_err().status, 400);
    }

    #[test]
    fn unknown_model_error_has_the_vendor_shape() {
        let err = CompatError::from(ApiError::not_found("The model `nope` does not exist"));
        let body = serde_json::to_value(ErrorBody { error: err.body() }).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {
                "message": "The model `nope` does not exist",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found"
            }})
        );
        assert_eq!(err.status, 404);
    }
}
