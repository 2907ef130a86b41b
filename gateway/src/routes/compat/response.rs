//! The responses API's response object and its named events, numbered in order: what the
//! plain and streamed calls (responses.rs) and background responses (background.rs) answer.

use actix_web::web::Bytes;
use docchat_proto::chat::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::CompatError;
use super::sse::named_event;

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
    pub(super) instructions: Option<String>,
    pub(super) temperature: Option<f64>,
    pub(super) max_output_tokens: Option<u32>,
    /// The caller's metadata, echoed (`{}` when none was sent).
    pub(super) metadata: serde_json::Value,
    pub(super) message_id: String,
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
    pub(super) fn object<'a>(
        &'a self,
        text: &'a str,
        done: Option<&pb::CompatReply>,
    ) -> ResponseObject<'a> {
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
    pub(super) fn closing(&mut self, done: &pb::CompatReply) -> Vec<Bytes> {
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
