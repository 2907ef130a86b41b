//! Chat sessions and their messages, scoped to their owner. Creating and deleting a
//! session announces it (`chat.session.*`) through the outbox.

use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::bus::topics;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::limits::{SizedPage, page_by_size};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_proto::events::v1::{ChatSessionCreated, ChatSessionDeleted};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::entities::{chat_sessions, messages};

pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;

fn clamp(limit: u64) -> u64 {
    if limit == 0 {
        DEFAULT_LIMIT
    } else {
        limit.min(MAX_LIMIT)
    }
}

pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("chat session {id} not found"))
}

/// The collection a new session is linked to, as checked with ingest-service.
pub struct LinkedCollection {
    pub id: String,
    pub name: String,
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    collection: Option<LinkedCollection>,
) -> ApiResult<chat_sessions::Model> {
    let at = now();
    let txn = docchat_common::db::begin(db).await?;
    let (collection_id, collection_name) = match collection {
        Some(c) => (Some(c.id), Some(c.name)),
        None => (None, None),
    };
    let session = chat_sessions::ActiveModel {
        id: Set(docchat_common::ids::new_id()),
        owner_id: Set(caller.user_id.clone()),
        owner_username: Set(caller.username.clone()),
        name: Set(None),
        collection_id: Set(collection_id),
        collection_name: Set(collection_name),
        latest_message_content: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(&txn)
    .await?;
    let event = envelope(
        topics::CHAT_SESSION_CREATED,
        &caller.user_id,
        &ChatSessionCreated {
            session_id: session.id.clone(),
            user_id: caller.user_id.clone(),
            collection_id: session.collection_id.clone().unwrap_or_default(),
        },
    );
    outbox::enqueue(&txn, &event).await?;
    txn.commit().await?;
    Ok(session)
}

pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<chat_sessions::Model>> {
    Ok(chat_sessions::Entity::find()
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .order_by_desc(chat_sessions::Column::UpdatedAt)
        .order_by_desc(chat_sessions::Column::Id)
        .offset(offset)
        .limit(clamp(limit))
        .all(db)
        .await?)
}

pub async fn get(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<chat_sessions::Model> {
    chat_sessions::Entity::find_by_id(id.to_owned())
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Of `ids`, the caller's sessions as (id, name), in one query; other ids are left out.
pub async fn names(
    db: &DatabaseConnection,
    caller: &Caller,
    ids: &[String],
) -> ApiResult<Vec<(String, Option<String>)>> {
    if ids.len() as u64 > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_LIMIT} session ids at once"
        )));
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(chat_sessions::Entity::find()
        .select_only()
        .column(chat_sessions::Column::Id)
        .column(chat_sessions::Column::Name)
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(chat_sessions::Column::Id.is_in(ids.iter().cloned()))
        .into_tuple()
        .all(db)
        .await?)
}

/// Deletes an owned session with its messages; answers the deleted session.
pub async fn delete(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<chat_sessions::Model> {
    let txn = docchat_common::db::begin(db).await?;
    let session = chat_sessions::Entity::find_by_id(id.to_owned())
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .one(&txn)
        .await?
        .ok_or_else(|| not_found(id))?;
    messages::Entity::delete_many()
        .filter(messages::Column::SessionId.eq(id))
        .exec(&txn)
        .await?;
    chat_sessions::Entity::delete_by_id(id.to_owned())
        .exec(&txn)
        .await?;
    let event = envelope(
        topics::CHAT_SESSION_DELETED,
        &caller.user_id,
        &ChatSessionDeleted {
            session_id: session.id.clone(),
            user_id: caller.user_id.clone(),
            collection_id: session.collection_id.clone().unwrap_or_default(),
        },
    );
    outbox::enqueue(&txn, &event).await?;
    txn.commit().await?;
    Ok(session)
}

/// A page of the session's messages, oldest first (cut at `page_bytes`).
pub async fn messages(
    db: &DatabaseConnection,
    caller: &Caller,
    session_id: &str,
    offset: u64,
    limit: u64,
    page_bytes: u64,
) -> ApiResult<SizedPage<messages::Model>> {
    get(db, caller, session_id).await?;
    let page = messages::Entity::find()
        .filter(messages::Column::SessionId.eq(session_id))
        .order_by_asc(messages::Column::CreatedAt)
        .order_by_asc(messages::Column::Id)
        .offset(offset)
        .limit(clamp(limit));
    // Long questions and replies: the page stops at its byte budget, not at its count only.
    let sized = [messages::Column::Content, messages::Column::Error];
    Ok(page_by_size(db, page, messages::Column::Id, &sized, page_bytes).await?)
}

/// Sessions of a deleted collection lose their link; they stay usable without RAG.
pub async fn detach_collection(db: &DatabaseConnection, collection_id: &str) -> ApiResult<u64> {
    let result = chat_sessions::Entity::update_many()
        .col_expr(
            chat_sessions::Column::CollectionId,
            sea_orm::sea_query::Expr::value(Option::<String>::None),
        )
        .col_expr(
            chat_sessions::Column::CollectionName,
            sea_orm::sea_query::Expr::value(Option::<String>::None),
        )
        .filter(chat_sessions::Column::CollectionId.eq(collection_id))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}
