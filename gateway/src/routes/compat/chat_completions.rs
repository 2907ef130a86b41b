//! `POST /compat_api/v1/chat/completions`: the vendor's chat completions, plain or streamed
//! as Server-Sent Events, over chat-service's `CompatComplete`/`CompatStream`.

use actix_web::web::Bytes;
use actix_web::{HttpResponse, post};
use docchat_common::error::ApiError;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::compat_chunk::Kind;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::CompatApi;
use super::error::{CompatError, CompatResult, ErrorBody};
use super::json::CompatJson;
use super::sse::{ServerSentEvent, data_event, open_stream, sse};
use super::{new_id, unix_now};

/// A chat completion request; fields the vendor defines and docchat does not use are
/// accepted and ignored.
#[derive(Deserialize, ToSchema)]
#[schema(as = CompatChatRequest)]
pub struct ChatRequest {
    /// A model of `GET /compat_api/v1/models`, or `auto`.
    model: String,
    messages: Vec<ChatMessageIn>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 1)]
    max_tokens: Option<u32>,
    /// The vendor's newer name for `max_tokens`.
    #[serde(default)]
    #[schema(minimum = 1)]
    max_completion_tokens: Option<u32>,
    /// Answer as Server-Sent Events (`text/event-stream`), ending with `data: [DONE]`.
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CompatStreamOptions)]
pub struct StreamOptions {
    /// A last chunk with no choices and the usage.
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CompatChatMessage)]
pub struct ChatMessageIn {
    /// developer, system, user or assistant.
    role: String,
    /// Absent or null on an assistant turn that only called tools.
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = CompatContent)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// A content part: text (`text`, `input_text`, `output_text`, `refusal`) or `image_url`;
/// audio and file parts are refused.
#[derive(Deserialize, ToSchema)]
#[schema(as = CompatContentPart)]
pub struct Part {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    image_url: Option<ImageUrl>,
}

#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = CompatImageUrl)]
pub enum ImageUrl {
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

#[derive(Serialize, ToSchema)]
#[schema(as = CompatUsage)]
pub struct Usage {
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

/// A whole (non-streamed) chat completion.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatChatCompletion)]
pub struct ChatCompletion<'a> {
    id: &'a str,
    /// `chat.completion`.
    object: &'static str,
    /// Unix seconds.
    created: i64,
    model: &'a str,
    #[schema(value_type = Vec<ChatChoice>)]
    choices: [ChatChoice<'a>; 1],
    usage: Usage,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatChatChoice)]
pub struct ChatChoice<'a> {
    index: u32,
    message: MessageOut<'a>,
    /// stop or length.
    finish_reason: &'a str,
    #[schema(value_type = Option<Object>)]
    logprobs: Option<()>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = CompatAssistantMessage)]
pub struct MessageOut<'a> {
    role: &'static str,
    content: &'a str,
    #[schema(value_type = Option<String>)]
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

#[utoipa::path(
    tag = "Compatible API",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "`stream` false: the completion; `stream` true: Server-Sent Events, each `data:` a `chat.completion.chunk`, the last `data: [DONE]` (a failure after the first event is a `data:` error object)",
            content((ChatCompletion = "application/json"), (ServerSentEvent = "text/event-stream"))),
        (status = 400, description = "invalid body, unsupported message part, temperature outside 0..2", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "a cost cap is reached", body = ErrorBody),
        (status = 404, description = "unknown model (`code` model_not_found)", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 503, description = "no model configured, or the upstream failed", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/chat/completions")]
pub async fn chat_completions(
    CompatApi(api): CompatApi,
    CompatJson(r): CompatJson<ChatRequest>,
) -> CompatResult<HttpResponse> {
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
}
