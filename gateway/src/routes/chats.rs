//! /api/v1/chats, the chat sessions of a collection or a document, and deleting messages.

use actix_web::{HttpResponse, delete, get, patch, post, put, web};
use chrono::{DateTime, Utc};
use docchat_proto::chat::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{Count, PageQuery, comma_list, page, ts_req};
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

/// Rename body; unknown fields are ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatSessionUpdate {
    /// 1 to 255 characters (surrounding spaces trimmed).
    #[schema(min_length = 1, max_length = 255)]
    pub name: String,
}

/// The collection to link a session to.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CollectionChange {
    /// A collection the caller can read.
    #[schema(min_length = 1)]
    pub collection_id: String,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct CollectionChatsQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// Accepted for the h2oGPTe client and ignored: the sessions listed are always the
    /// caller's own.
    pub username: Option<String>,
}

/// Registers this module's routes (`/chats/count` before `/chats/{session_id}`).
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_chat_session)
        .service(list_chat_sessions)
        .service(get_chat_session_count)
        .service(get_chat_session)
        .service(update_chat_session)
        .service(delete_chat_session)
        .service(update_chat_session_collection)
        .service(delete_chat_session_collection)
        .service(get_chat_session_messages)
        .service(list_chat_sessions_for_collection)
        .service(get_chat_session_count_for_collection)
        .service(list_chat_sessions_for_document)
        .service(delete_messages);
}

fn sessions_json(list: pb::ChatSessionList) -> HttpResult<web::Json<Vec<ChatSession>>> {
    Ok(web::Json(
        list.sessions
            .into_iter()
            .map(ChatSession::try_from)
            .collect::<HttpResult<_>>()?,
    ))
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
    sessions_json(list)
}

/// How many chat sessions the caller has.
#[utoipa::path(
    tag = "Chat",
    responses((status = 200, body = Count), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/chats/count")]
pub async fn get_chat_session_count(api: Api) -> HttpResult<web::Json<Count>> {
    let request = pb::CountSessionsRequest {
        collection_id: None,
    };
    let count = api.chat().count_sessions(request).await?.into_inner().count;
    Ok(web::Json(Count::of(count)))
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

/// Renames a session.
#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    request_body = ChatSessionUpdate,
    responses((status = 200, body = ChatSession), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[patch("/chats/{session_id}")]
pub async fn update_chat_session(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ChatSessionUpdate>,
) -> HttpResult<web::Json<ChatSession>> {
    let ChatSessionUpdate { name } = body.into_inner();
    let request = pb::UpdateSessionRequest {
        id: path.into_inner(),
        name,
    };
    let session = api.chat().update_session(request).await?;
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

/// Links a session to a collection (for RAG) in place of the one it had.
#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    request_body = CollectionChange,
    responses((status = 200, body = ChatSession), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/chats/{session_id}/collection")]
pub async fn update_chat_session_collection(
    api: Api,
    path: web::Path<String>,
    body: web::Json<CollectionChange>,
) -> HttpResult<web::Json<ChatSession>> {
    let CollectionChange { collection_id } = body.into_inner();
    let request = pb::SetSessionCollectionRequest {
        id: path.into_inner(),
        collection_id: Some(collection_id),
    };
    let session = api.chat().set_session_collection(request).await?;
    Ok(web::Json(session.into_inner().try_into()?))
}

/// Unlinks a session from its collection: it goes on without documents to search.
#[utoipa::path(
    tag = "Chat",
    params(("session_id" = String, Path)),
    responses((status = 200, body = ChatSession), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/chats/{session_id}/collection")]
pub async fn delete_chat_session_collection(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<ChatSession>> {
    let request = pb::SetSessionCollectionRequest {
        id: path.into_inner(),
        collection_id: None,
    };
    let session = api.chat().set_session_collection(request).await?;
    Ok(web::Json(session.into_inner().try_into()?))
}

/// The caller's chat sessions linked to a collection, newest first.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path), CollectionChatsQuery),
    responses((status = 200, body = Vec<ChatSession>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/chats")]
pub async fn list_chat_sessions_for_collection(
    api: Api,
    path: web::Path<String>,
    query: web::Query<CollectionChatsQuery>,
) -> HttpResult<web::Json<Vec<ChatSession>>> {
    let (offset, limit) = page(query.offset, query.limit)?;
    let request = pb::CollectionSessionsRequest {
        collection_id: path.into_inner(),
        offset,
        limit,
    };
    sessions_json(
        api.chat()
            .list_collection_sessions(request)
            .await?
            .into_inner(),
    )
}

/// How many of the caller's chat sessions are linked to a collection.
#[utoipa::path(
    tag = "Collections",
    params(("collection_id" = String, Path)),
    responses((status = 200, body = Count), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/collections/{collection_id}/chats/count")]
pub async fn get_chat_session_count_for_collection(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Count>> {
    let request = pb::CountSessionsRequest {
        collection_id: Some(path.into_inner()),
    };
    let count = api.chat().count_sessions(request).await?.into_inner().count;
    Ok(web::Json(Count::of(count)))
}

/// The chat session that produced a document (an agent's file), when it is the caller's:
/// one session or none.
#[utoipa::path(
    tag = "Documents",
    params(("document_id" = String, Path), PageQuery),
    responses((status = 200, body = Vec<ChatSession>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/documents/{document_id}/chats")]
pub async fn list_chat_sessions_for_document(
    api: Api,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<Vec<ChatSession>>> {
    let (offset, limit) = page(query.offset, query.limit)?;
    let request = pb::DocumentSessionsRequest {
        document_id: path.into_inner(),
        offset,
        limit,
    };
    sessions_json(
        api.chat()
            .list_document_sessions(request)
            .await?
            .into_inner(),
    )
}

/// Deletes messages: comma-separated ids (`a,b`, also percent-encoded), all or none. A
/// question goes with its reply; a reply alone leaves its question. Their references and
/// metadata go too.
#[utoipa::path(
    tag = "Chat",
    params(("message_ids" = String, Path, description = "comma-separated message ids (1 to 1000)")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, description = "one of the ids is not one of the caller's messages: nothing was deleted", body = ErrorBody), (status = 409, description = "the reply to one of the questions is being generated: stop it first", body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/messages/{message_ids}")]
pub async fn delete_messages(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let request = pb::MessageIds {
        ids: comma_list(&path.into_inner()),
    };
    api.chat().delete_messages(request).await?;
    Ok(HttpResponse::NoContent().finish())
}
