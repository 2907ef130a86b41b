//! Chat sessions and their messages, scoped to their owner. Creating and deleting a
//! session, and changing its collection, announce it (`chat.session.*`) through the outbox.

use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::bus::topics;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::limits::{SizedPage, page_by_size};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_proto::events::v1::{
    ChatSessionCollectionChanged, ChatSessionCreated, ChatSessionDeleted,
};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Select, Set,
};

use crate::entities::{
    active_completions, chat_sessions, message_meta, message_references, messages,
};

pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;
/// The longest session name, in characters (the column's size).
pub const MAX_NAME_CHARS: usize = 255;

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

/// The caller's sessions, all or those linked to `collection_id`.
fn owned(caller: &Caller, collection_id: Option<&str>) -> Select<chat_sessions::Entity> {
    let mine = chat_sessions::Entity::find()
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()));
    match collection_id {
        Some(c) => mine.filter(chat_sessions::Column::CollectionId.eq(c)),
        None => mine,
    }
}

/// A page of the caller's sessions (all, or those linked to `collection_id`), newest
/// first.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    collection_id: Option<&str>,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<chat_sessions::Model>> {
    Ok(owned(caller, collection_id)
        .order_by_desc(chat_sessions::Column::UpdatedAt)
        .order_by_desc(chat_sessions::Column::Id)
        .offset(offset)
        .limit(clamp(limit))
        .all(db)
        .await?)
}

/// How many sessions the caller has (all, or those linked to `collection_id`).
pub async fn count(
    db: &DatabaseConnection,
    caller: &Caller,
    collection_id: Option<&str>,
) -> ApiResult<u64> {
    Ok(owned(caller, collection_id).count(db).await?)
}

/// The caller's session `id`, if it is one.
pub async fn find(
    db: &impl ConnectionTrait,
    caller: &Caller,
    id: &str,
) -> ApiResult<Option<chat_sessions::Model>> {
    Ok(owned(caller, None)
        .filter(chat_sessions::Column::Id.eq(id))
        .one(db)
        .await?)
}

pub async fn get(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<chat_sessions::Model> {
    find(db, caller, id).await?.ok_or_else(|| not_found(id))
}

/// Renames the caller's session `id` (1 to [`MAX_NAME_CHARS`] characters once trimmed).
pub async fn rename(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    name: &str,
) -> ApiResult<chat_sessions::Model> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    // One statement scoped to the owner: a session deleted meanwhile is a 404, not a
    // failed update.
    let renamed = chat_sessions::Entity::update_many()
        .col_expr(chat_sessions::Column::Name, Expr::value(name.to_owned()))
        .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(now()))
        .filter(chat_sessions::Column::Id.eq(id))
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .exec(db)
        .await?;
    if renamed.rows_affected == 0 {
        return Err(not_found(id));
    }
    get(db, caller, id).await
}

/// Links the caller's session `id` to `collection` (checked with ingest-service), or
/// unlinks it (None); a change is announced (`chat.session.collection_changed`) in the
/// same transaction. Linking it where it is already linked changes nothing.
pub async fn set_collection(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    collection: Option<LinkedCollection>,
) -> ApiResult<chat_sessions::Model> {
    let txn = docchat_common::db::begin(db).await?;
    let session = find(&txn, caller, id).await?.ok_or_else(|| not_found(id))?;
    let (collection_id, collection_name) = match collection {
        Some(c) => (Some(c.id), Some(c.name)),
        None => (None, None),
    };
    if session.collection_id == collection_id {
        return Ok(session);
    }
    let at = now();
    let changed = chat_sessions::Entity::update_many()
        .col_expr(
            chat_sessions::Column::CollectionId,
            Expr::value(collection_id.clone()),
        )
        .col_expr(
            chat_sessions::Column::CollectionName,
            Expr::value(collection_name.clone()),
        )
        .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at))
        .filter(chat_sessions::Column::Id.eq(id))
        .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
        .exec(&txn)
        .await?;
    if changed.rows_affected == 0 {
        return Err(not_found(id));
    }
    let event = envelope(
        topics::CHAT_SESSION_COLLECTION_CHANGED,
        &caller.user_id,
        &ChatSessionCollectionChanged {
            session_id: session.id.clone(),
            user_id: caller.user_id.clone(),
            collection_id: collection_id.clone().unwrap_or_default(),
        },
    );
    outbox::enqueue(&txn, &event).await?;
    txn.commit().await?;
    Ok(chat_sessions::Model {
        collection_id,
        collection_name,
        updated_at: at,
        ..session
    })
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

/// Deletes the caller's messages `ids`, all or none: an id that is not the caller's message
/// is a 404 and nothing is deleted. A question goes with its reply (the conversation keeps
/// no answer to a question it no longer has); a reply alone leaves its question, which can
/// be asked again. The references and metadata of every deleted message go with it, and
/// each session touched shows its newest remaining message as its latest. A question whose
/// reply is being generated is a conflict (409): stop it first, or its reply would be
/// stored for a question that is gone.
pub async fn delete_messages(
    db: &DatabaseConnection,
    caller: &Caller,
    ids: &[String],
) -> ApiResult<()> {
    let mut wanted = ids.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Err(ApiError::bad_request("give at least one message id"));
    }
    if wanted.len() as u64 > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_LIMIT} message ids at once"
        )));
    }
    let txn = docchat_common::db::begin(db).await?;
    let found: Vec<(String, String, Option<String>)> = messages::Entity::find()
        .select_only()
        .column(messages::Column::Id)
        .column(messages::Column::SessionId)
        .column(messages::Column::ReplyTo)
        .filter(messages::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(messages::Column::Id.is_in(wanted.iter().cloned()))
        .into_tuple()
        .all(&txn)
        .await?;
    if let Some(missing) = wanted
        .iter()
        .find(|id| !found.iter().any(|(f, _, _)| f == *id))
    {
        return Err(ApiError::not_found(format!("message {missing} not found")));
    }
    let questions: Vec<String> = found
        .iter()
        .filter(|(_, _, reply_to)| reply_to.is_none())
        .map(|(id, _, _)| id.clone())
        .collect();
    let generating = active_completions::Entity::find()
        .filter(active_completions::Column::QuestionId.is_in(questions.iter().cloned()))
        .filter(active_completions::Column::LeaseUntil.gt(now()))
        .one(&txn)
        .await?;
    if let Some(running) = generating {
        return Err(ApiError::conflict(format!(
            "the reply to question {} is being generated: stop it first",
            running.question_id
        )));
    }
    let replies: Vec<String> = messages::Entity::find()
        .select_only()
        .column(messages::Column::Id)
        .filter(messages::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(messages::Column::ReplyTo.is_in(questions))
        .into_tuple()
        .all(&txn)
        .await?;
    let mut doomed: Vec<String> = found.iter().map(|(id, _, _)| id.clone()).collect();
    doomed.extend(replies);
    doomed.sort_unstable();
    doomed.dedup();
    message_references::Entity::delete_many()
        .filter(message_references::Column::MessageId.is_in(doomed.iter().cloned()))
        .exec(&txn)
        .await?;
    message_meta::Entity::delete_many()
        .filter(message_meta::Column::MessageId.is_in(doomed.iter().cloned()))
        .exec(&txn)
        .await?;
    messages::Entity::delete_many()
        .filter(messages::Column::Id.is_in(doomed))
        .exec(&txn)
        .await?;
    let mut sessions: Vec<String> = found.into_iter().map(|(_, s, _)| s).collect();
    sessions.sort_unstable();
    sessions.dedup();
    let at = now();
    for session in sessions {
        // As a stored reply does: the newest message with text is the latest.
        let latest: Option<String> = messages::Entity::find()
            .select_only()
            .column(messages::Column::Content)
            .filter(messages::Column::SessionId.eq(&session))
            .filter(messages::Column::Content.ne(""))
            .order_by_desc(messages::Column::CreatedAt)
            .order_by_desc(messages::Column::Id)
            .into_tuple()
            .one(&txn)
            .await?;
        chat_sessions::Entity::update_many()
            .col_expr(
                chat_sessions::Column::LatestMessageContent,
                Expr::value(latest),
            )
            .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at))
            .filter(chat_sessions::Column::Id.eq(session))
            .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(())
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
