//! `POST /compat_api/v1/responses`: the vendor's responses API (text in, text out), plain
//! or as its sequence of named Server-Sent Events.

use actix_web::web::Bytes;
use actix_web::{HttpResponse, post};
use docchat_common::error::ApiError;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::compat_chunk::Kind;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::CompatApi;
use super::chat_completions::Part;
use super::error::ErrorBody;
use super::error::{CompatError, CompatResult};
use super::json::CompatJson;
use super::sse::{ServerSentEvent, named_event, open_stream, sse};
use super::{new_id, unix_now};

/// A responses request: text only (no files, images or tools).
#[derive(Deserialize, ToSchema)]
#[schema(as = CompatResponsesRequest)]
pub struct ResponsesRequest {
    /// A model of `GET /compat_api/v1/models`, or `auto`.
    model: String,
    input: Input,
    /// A system message before the input.
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 1)]
    max_output_tokens: Option<u32>,
    /// Answer as the vendor's named Server-Sent Events (`response.created` …
    /// `response.completed`).
    #[serde(default)]
    stream: Option<bool>,
    /// Generate it whatever becomes of this connection: the answer comes at once (status
    /// `queued`), `GET /responses/{id}` reads it (`?stream=true&starting_after=N` streams
    /// its events after N), `POST /responses/{id}/cancel` stops it. Kept for
    /// `DOCCHAT_CHAT_STREAM_RETENTION_SECONDS` (600) after it ends, for its owner only.
    #[serde(default)]
    background: Option<bool>,
    /// Echoed in the response.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A user message, or messages with roles.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = CompatResponsesInput)]
pub enum Input {
    Text(String),
    Items(Vec<InputItem>),
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CompatResponsesInputItem)]
pub struct InputItem {
    /// `message` (or absent); other item types are refused.
    #[serde(rename = "type", default)]
    kind: Option<String>,
    /// developer, system, user or assistant.
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<ItemContent>,
}

#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = CompatResponsesItemContent)]
pub enum ItemContent {
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

/// What a response object needs besides its output (a background response stores it,
/// as JSON, without the three fields chat-service keeps itself).
#[derive(Serialize, Deserialize)]
pub(super) struct ResponseHead {
    #[serde(skip)]
    pub(super) id: String,
    #[serde(skip)]
    pub(super) created_at: i64,
    #[serde(skip)]
    pub(super) model: String,
    instructions: Option<String>,
    temperature: Option<f64>,
    max_output_tokens: Option<u32>,
    /// The caller's metadata, echoed (`{}` when none was sent).
    metadata: serde_json::Value,
    message_id: String,
}

/// A response object.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatResponse)]
pub struct ResponseObject<'a> {
    id: &'a str,
    object: &'static str,
    created_at: i64,
    model: &'a str,
    status: &'a str,
    error: Option<ResponseError>,
    incomplete_details: Option<IncompleteDetails>,
    instructions: Option<&'a str>,
    max_output_tokens: Option<u32>,
    output: Vec<OutputMessage<'a>>,
    parallel_tool_calls: bool,
    temperature: Option<f64>,
    tool_choice: &'static str,
    #[schema(value_type = Vec<Object>)]
    tools: [(); 0],
    top_p: Option<f64>,
    truncation: &'static str,
    text: TextConfig,
    #[schema(value_type = Object)]
    metadata: &'a serde_json::Value,
    usage: Option<ResponseUsage>,
}

/// Why a response failed.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatResponseError)]
pub struct ResponseError {
    /// server_error, rate_limit_exceeded …
    code: &'static str,
    message: String,
}

impl ResponseError {
    pub(super) fn of(e: &pb::CompletionError) -> ResponseError {
        let code = match e.status {
            429 => "rate_limit_exceeded",
            _ => "server_error",
        };
        ResponseError {
            code,
            message: e.message.clone(),
        }
    }
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatIncompleteDetails)]
pub struct IncompleteDetails {
    reason: &'static str,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatTextConfig)]
pub struct TextConfig {
    format: TextFormat,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatTextFormat)]
pub struct TextFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatOutputMessage)]
pub struct OutputMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    status: &'a str,
    content: Vec<OutputText<'a>>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatOutputText)]
pub struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[schema(value_type = Vec<Object>)]
    annotations: [(); 0],
    #[schema(value_type = Vec<Object>)]
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

#[derive(Serialize, ToSchema)]
#[schema(as = CompatResponseUsage)]
pub struct ResponseUsage {
    input_tokens: u64,
    input_tokens_details: CachedTokens,
    output_tokens: u64,
    output_tokens_details: ReasoningTokens,
    total_tokens: u64,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatCachedTokens)]
pub struct CachedTokens {
    cached_tokens: u64,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatReasoningTokens)]
pub struct ReasoningTokens {
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
        let status = match done {
            None => "in_progress",
            Some(d) if d.finish_reason == "length" => "incomplete",
            Some(_) => "completed",
        };
        self.object_as(status, text, done, None)
    }

    /// The response object in `status` with `text` so far (no output item while queued or
    /// in progress without text), its `usage` once ended, its `error` when failed.
    pub(super) fn object_as<'a>(
        &'a self,
        status: &'a str,
        text: &'a str,
        usage: Option<&pb::CompatReply>,
        error: Option<ResponseError>,
    ) -> ResponseObject<'a> {
        let incomplete_details = (status == "incomplete").then_some(IncompleteDetails {
            reason: "max_output_tokens",
        });
        let running = matches!(status, "queued" | "in_progress");
        let output = if running && text.is_empty() {
            Vec::new()
        } else {
            vec![self.message(item_status(status), vec![OutputText::of(text)])]
        };
        ResponseObject {
            id: &self.id,
            object: "response",
            created_at: self.created_at,
            model: &self.model,
            status,
            error,
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
            usage: usage.map(ResponseUsage::of),
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

/// The status of a response's message item: the vendor's items are in progress,
/// completed or incomplete.
fn item_status(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        "queued" | "in_progress" => "in_progress",
        _ => "incomplete",
    }
}

/// Events before the first delta, and after the last (their sequence numbers are fixed by
/// the count of deltas, so a stream can be resumed after any of them).
pub(super) const OPENING: u64 = 4;
pub(super) const CLOSING: u64 = 4;

/// The events of a streamed response, numbered in order: `sequence` is the next one's.
pub(super) struct EventWriter {
    pub(super) head: ResponseHead,
    pub(super) sequence: u64,
    pub(super) text: String,
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
        named_event(kind, &fields)
    }

    fn with(pairs: Vec<(&str, serde_json::Value)>) -> serde_json::Map<String, serde_json::Value> {
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    fn value(v: impl Serialize) -> serde_json::Value {
        serde_json::to_value(v).unwrap_or_default()
    }

    /// response.created … response.content_part.added (the four [`OPENING`] events); a
    /// background response is created `queued`.
    pub(super) fn opening(&mut self, created: &str) -> Vec<Bytes> {
        let queued = Self::value(self.head.object_as(created, "", None, None));
        let response = Self::value(self.head.object("", None));
        let item = Self::value(self.head.message("in_progress", Vec::new()));
        let id = self.head.message_id.clone();
        vec![
            self.event("response.created", Self::with(vec![("response", queued)])),
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

    pub(super) fn delta(&mut self, delta: String) -> Bytes {
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
        let status = self.head.object(&text, Some(done)).status.to_owned();
        self.closing_as(&text, &status, Some(done), None)
    }

    /// The four [`CLOSING`] events of a response that ended in `status` with `text`:
    /// response.output_text.done … then response.completed, response.incomplete, or
    /// response.failed (failed, and cancelled: the vendor names no event for it; the
    /// response's status says which).
    pub(super) fn closing_as(
        &mut self,
        text: &str,
        status: &str,
        usage: Option<&pb::CompatReply>,
        error: Option<ResponseError>,
    ) -> Vec<Bytes> {
        let response = Self::value(self.head.object_as(status, text, usage, error));
        let item = Self::value(
            self.head
                .message(item_status(status), vec![OutputText::of(text)]),
        );
        let id = self.head.message_id.clone();
        let last = match status {
            "completed" => "response.completed",
            "incomplete" => "response.incomplete",
            _ => "response.failed",
        };
        vec![
            self.event(
                "response.output_text.done",
                Self::with(vec![
                    ("item_id", id.clone().into()),
                    ("output_index", 0.into()),
                    ("content_index", 0.into()),
                    ("text", text.into()),
                    ("logprobs", serde_json::Value::Array(Vec::new())),
                ]),
            ),
            self.event(
                "response.content_part.done",
                Self::with(vec![
                    ("item_id", id.into()),
                    ("output_index", 0.into()),
                    ("content_index", 0.into()),
                    ("part", Self::value(OutputText::of(text))),
                ]),
            ),
            self.event(
                "response.output_item.done",
                Self::with(vec![("output_index", 0.into()), ("item", item)]),
            ),
            self.event(last, Self::with(vec![("response", response)])),
        ]
    }

    pub(super) fn error(&mut self, err: &CompatError) -> Bytes {
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

#[utoipa::path(
    tag = "Compatible API",
    request_body = ResponsesRequest,
    responses(
        (status = 200, description = "`background` true: the response at once (`queued`), or with `stream` its events from `response.created` on (closing the stream does not stop it). `stream` false: the response; `stream` true: named Server-Sent Events (`response.created`, `response.in_progress`, `response.output_item.added`, `response.content_part.added`, `response.output_text.delta`…, `response.output_text.done`, `response.content_part.done`, `response.output_item.done`, `response.completed` or `response.incomplete`; `error` on a failure after the first event)",
            content((ResponseObject = "application/json"), (ServerSentEvent = "text/event-stream"))),
        (status = 400, description = "invalid body, non-text input, temperature outside 0..2", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "a cost cap is reached", body = ErrorBody),
        (status = 404, description = "unknown model (`code` model_not_found)", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 503, description = "no model configured, or the upstream failed", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/responses")]
pub async fn responses(
    CompatApi(api): CompatApi,
    CompatJson(r): CompatJson<ResponsesRequest>,
) -> CompatResult<HttpResponse> {
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
        metadata: serde_json::Value::Object(r.metadata.unwrap_or_default()),
        message_id: new_id("msg_"),
    };
    if r.background.unwrap_or(false) {
        return super::background::start(&api, request, head, stream).await;
    }
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
    let opening = writer.opening("in_progress");
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
