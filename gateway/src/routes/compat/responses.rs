//! `POST /compat_api/v1/responses`: the vendor's responses API (text in, text out), plain
//! or as its sequence of named Server-Sent Events.

use actix_web::{HttpResponse, post};
use docchat_common::error::ApiError;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::compat_chunk::Kind;
use futures::StreamExt;
use serde::Deserialize;
use utoipa::ToSchema;

use super::auth::CompatApi;
use super::chat_completions::Part;
use super::error::ErrorBody;
use super::error::{CompatError, CompatResult};
use super::json::CompatJson;
use super::response::{EventWriter, ResponseHead, ResponseObject};
use super::sse::{ServerSentEvent, open_stream, sse};
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
