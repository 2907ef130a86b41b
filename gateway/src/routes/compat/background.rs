//! Background responses (`background: true`): created through `POST /responses`, read
//! through `GET /responses/{id}` (with `?stream=true&starting_after=N` as the vendor's
//! events after sequence number N), stopped through `POST /responses/{id}/cancel`.
//! chat-service generates and keeps them (`BackgroundStart` …); the events are numbered
//! from what it stores alone — [`OPENING`] events, then one delta per stored line, then
//! [`CLOSING`] events — so a stream resumed on any replica continues exactly where the
//! client stopped.

use actix_web::web::{self, Bytes};
use actix_web::{HttpResponse, get, post};
use docchat_common::error::ApiError;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::background_event::Event;
use futures::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::CompatApi;
use super::error::{CompatError, CompatResult, ErrorBody};
use super::json::CompatQuery;
use super::response::{CLOSING, EventWriter, OPENING, ResponseError, ResponseHead, ResponseObject};
use super::sse::{ServerSentEvent, sse};
use crate::auth::Api;

/// Stores a background call and answers it (`queued`), or streams its events.
pub(super) async fn start(
    api: &Api,
    request: pb::CompatRequest,
    head: ResponseHead,
    stream: bool,
) -> CompatResult<HttpResponse> {
    let stored = serde_json::to_string(&head)
        .map_err(|e| ApiError::internal("a background response's head", e))?;
    let record = api
        .chat()
        .background_start(pb::BackgroundRequest {
            request: Some(request),
            head: stored,
        })
        .await?
        .into_inner();
    if stream {
        return events(api, record, None).await;
    }
    object(&record)
}

#[derive(Deserialize, IntoParams)]
pub struct RetrieveQuery {
    /// true: the response's events as Server-Sent Events (the live ones as they come).
    #[serde(default)]
    stream: Option<bool>,
    /// With `stream`: only the events after this sequence number.
    #[serde(default)]
    starting_after: Option<u64>,
}

#[utoipa::path(
    tag = "Compatible API",
    params(("response_id" = String, Path), RetrieveQuery),
    responses(
        (status = 200, description = "the background response as it stands (status queued, in_progress, completed, incomplete, failed or cancelled; the output so far); with `stream=true` its named Server-Sent Events after `starting_after`, live until it ends",
            content((ResponseObject = "application/json"), (ServerSentEvent = "text/event-stream"))),
        (status = 401, body = ErrorBody),
        (status = 404, description = "no such response of the caller's (another user's, expired, or never created)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/responses/{response_id}")]
pub async fn get_response(
    CompatApi(api): CompatApi,
    path: web::Path<String>,
    CompatQuery(query): CompatQuery<RetrieveQuery>,
) -> CompatResult<HttpResponse> {
    let record = api
        .chat()
        .background_get(pb::BackgroundRef {
            id: path.into_inner(),
        })
        .await?
        .into_inner();
    if query.stream.unwrap_or(false) {
        return events(&api, record, query.starting_after).await;
    }
    if query.starting_after.is_some() {
        return Err(
            CompatError::invalid("starting_after needs stream=true").param("starting_after")
        );
    }
    object(&record)
}

#[utoipa::path(
    tag = "Compatible API",
    params(("response_id" = String, Path)),
    responses(
        (status = 200, description = "the response, stopped (status cancelled with its output so far) unless it had ended, then as it ended", body = ResponseObject),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/responses/{response_id}/cancel")]
pub async fn cancel_response(
    CompatApi(api): CompatApi,
    path: web::Path<String>,
) -> CompatResult<HttpResponse> {
    let record = api
        .chat()
        .background_cancel(pb::BackgroundRef {
            id: path.into_inner(),
        })
        .await?
        .into_inner();
    object(&record)
}

/// The stored head of `record` with its id, model and time.
fn head_of(record: &pb::BackgroundResponse) -> CompatResult<ResponseHead> {
    let mut head: ResponseHead = serde_json::from_str(&record.head)
        .map_err(|e| ApiError::internal("reading a background response's head", e))?;
    head.id = record.id.clone();
    head.model = record.model.clone();
    head.created_at = record.created_at.map(|t| t.seconds).unwrap_or_default();
    Ok(head)
}

fn object(record: &pb::BackgroundResponse) -> CompatResult<HttpResponse> {
    let head = head_of(record)?;
    let body = serde_json::to_vec(&head.object_as(
        &record.status,
        &record.text,
        record.usage.as_ref(),
        record.error.as_ref().map(ResponseError::of),
    ))
    .map_err(|e| ApiError::internal("a background response", e))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

/// `record`'s events after sequence number `after` (all without): the opening ones, a
/// delta per line (line k is event OPENING - 1 + k), the closing ones once it ends.
async fn events(
    api: &Api,
    record: pb::BackgroundResponse,
    after: Option<u64>,
) -> CompatResult<HttpResponse> {
    // The first sequence number to send.
    let from = after.map_or(0, |n| n.saturating_add(1));
    let mut writer = EventWriter {
        head: head_of(&record)?,
        sequence: 0,
        text: String::new(),
    };
    let opening: Vec<Bytes> = writer
        .opening("queued")
        .into_iter()
        .zip(0..)
        .filter(|(_, seq)| *seq >= from)
        .map(|(event, _)| event)
        .collect();
    let after_line = from.saturating_sub(OPENING);
    let lines = api
        .chat()
        .background_follow(pb::BackgroundFollowRequest {
            id: record.id.clone(),
            after: after_line,
        })
        .await?
        .into_inner();
    let rest = lines.flat_map(move |item| {
        let w = &mut writer;
        let events = match item {
            Ok(pb::BackgroundEvent {
                event: Some(Event::Delta(text)),
                line,
            }) => {
                w.sequence = OPENING - 1 + line;
                vec![w.delta(text)]
            }
            Ok(pb::BackgroundEvent {
                event: Some(Event::Ended(ended)),
                ..
            }) => {
                let start = OPENING + ended.lines;
                w.sequence = start;
                w.closing_as(
                    &ended.text,
                    &ended.status,
                    ended.usage.as_ref(),
                    ended.error.as_ref().map(ResponseError::of),
                )
                .into_iter()
                .zip(start..start + CLOSING)
                .filter(|(_, seq)| *seq >= from)
                .map(|(event, _)| event)
                .collect()
            }
            Ok(_) => Vec::new(),
            Err(status) => vec![w.error(&CompatError::from(status))],
        };
        futures::stream::iter(events.into_iter().map(Ok::<_, actix_web::Error>))
    });
    let events = futures::stream::iter(opening.into_iter().map(Ok)).chain(rest);
    Ok(sse().streaming(events))
}
