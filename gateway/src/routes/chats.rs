//! /api/v1/chats

use actix_web::{HttpResponse, delete, get, post, web};
use chrono::{DateTime, Utc};
use docchat_proto::chat::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{PageQuery, page, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult};

/// A chat session.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatSession {
    pub id: String,
    pub name: Option<String>,
    /// Absent for sessions without a collection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection_name: Option<String>,
    pub latest_message_content: Option<String>,
    pub updated_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    /// Owner.
    pub username: String,
}

impl TryFrom<pb::ChatSession> for ChatSession {
    type Error = HttpError;

    fn try_from(s: pb::ChatSession) -> Result<Self, HttpError> {
        let pb::ChatSession {
            id,
            name,
            collection_id,
            collection_name,
            latest_message_content,
            updated_at,
            username,
            created_at,
        } = s;
        Ok(ChatSession {
            id,
            name,
            collection_id,
            collection_name,
            latest_message_content,
            updated_at: ts_req(updated_at)?,
            created_at: ts_req(created_at)?,
            username,
        })
    }
}

/// A question (no `reply_to`) or the model's reply to one.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatMessage {
    pub id: String,
    pub content: String,
    pub reply_to: Option<String>,
    pub votes: i64,
    pub created_at: DateTime<Utc>,
    pub has_references: bool,
    pub total_references: i64,
    pub username: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TryFrom<pb::Message> for ChatMessage {
    type Error = HttpError;

    fn try_from(m: pb::Message) -> Result<Self, HttpError> {
        let pb::Message {
            id,
            content,
            reply_to,
            has_references,
            votes,
            created_at,
            total_references,
            username,
            error,
        } = m;
        Ok(ChatMessage {
            id,
            content,
            reply_to,
            votes,
            created_at: ts_req(created_at)?,
            has_references,
            total_references,
            username,
            error,
        })
    }
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct CreateQuery {
    /// Link the session to this collection (RAG); without it the session has no collection.
    pub collection_id: Option<String>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_chat_session)
        .service(list_chat_sessions)
        .service(get_chat_session)
        .service(delete_chat_session)
        .service(get_chat_session_messages);
}

#[utoipa::path(
    tag = "Chat",
    params(CreateQuery),
    responses((status = 201, body = ChatSession), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/chats")]
pub async fn create_chat_session(
    api: Api,
    query: web::Query<CreateQuery>,
) -> HttpResult<HttpResponse> {
    // The body is an empty object (or a client's optional fields); nothing in it is used.
    let collection_id = query.into_inner().collection_id.filter(|c| !c.is_empty());
    let request = pb::CreateSessionRequest { collection_id };
    let session = api.chat().create_session(request).await?.into_inner();
    Ok(HttpResponse::Created().json(ChatSession::try_from(session)?))
}

#[utoipa::path(
    tag = "Chat",
    params(PageQuery),
    responses((status = 200, body = Vec<ChatSession>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/chats")]
pub async fn list_chat_sessions(
    api: Api,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<Vec<ChatSession>>> {
    let list = api
        .chat()
        .list_sessions(query.request()?)
        .await?
        .into_inner();
    Ok(web::Json(
        list.sessions
            .into_iter()
            .map(ChatSession::try_from)
            .collect::<HttpResult<_>>()?,
    ))
}

#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    responses((status = 200, body = ChatSession), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/chats/{session_id}")]
pub async fn get_chat_session(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<ChatSession>> {
    let id = path.into_inner();
    let session = api.chat().get_session(pb::SessionRef { id }).await?;
    Ok(web::Json(session.into_inner().try_into()?))
}

#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    responses((status = 200, description = "the deleted session", body = ChatSession), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/chats/{session_id}")]
pub async fn delete_chat_session(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let id = path.into_inner();
    // 200 with the deleted session rather than 204: the h2oGPTe client parses a
    // ChatSession from this response, and a 204 cannot carry one.
    let deleted = api.chat().delete_session(pb::SessionRef { id }).await?;
    Ok(HttpResponse::Ok().json(ChatSession::try_from(deleted.into_inner())?))
}

#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path), PageQuery),
    responses((status = 200, body = Vec<ChatMessage>, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/chats/{session_id}/messages")]
pub async fn get_chat_session_messages(
    api: Api,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> HttpResult<HttpResponse> {
    let (offset, limit) = page(query.offset, query.limit)?;
    let request = pb::ListMessagesRequest {
        session_id: path.into_inner(),
        offset,
        limit,
    };
    let list = api.chat().list_messages(request).await?.into_inner();
    let messages: Vec<ChatMessage> = list
        .messages
        .into_iter()
        .map(ChatMessage::try_from)
        .collect::<HttpResult<_>>()?;
    Ok(super::list_answer(
        &messages,
        offset,
        messages.len(),
        list.size_limited,
    ))
}
