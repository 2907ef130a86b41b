//! Server-Sent Events: the response head, one `data:` event, and the start of a streamed
//! model call shared by chat completions and responses.

use actix_web::HttpResponse;
use actix_web::web::Bytes;
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::compat_chunk::Kind;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::CompatResult;
use crate::auth::Api;

/// One Server-Sent Event (the schema of a `text/event-stream` answer's events).
#[derive(ToSchema)]
#[schema(as = CompatServerSentEvent)]
pub struct ServerSentEvent {
    /// The event's name (the responses API names each: `response.created` …).
    pub event: Option<String>,
    /// A JSON object (a chunk, an event, or an error object), or `[DONE]` last.
    pub data: String,
}

/// The head of an event stream (no proxy buffering, no caching).
pub fn sse() -> actix_web::HttpResponseBuilder {
    let mut builder = HttpResponse::Ok();
    builder
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-accel-buffering", "no"));
    builder
}

/// One `data:` event.
pub fn data_event(value: &impl Serialize) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"data: ");
    // Serializing plain structs cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// One `event:` + `data:` event (the responses API names its events).
pub fn named_event(kind: &str, value: &impl Serialize) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    let _ = serde_json::to_writer(&mut out, value);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Starts a streamed call: the first chunk (`start`, the resolved model) is awaited here,
/// so an unknown model or a refused call is an HTTP error rather than a broken stream.
pub async fn open_stream(
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
