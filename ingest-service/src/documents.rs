//! Documents: listing, counting, reading, updating (name, URI, metadata), deleting, their
//! chunks and collections, and transcript segments.

use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::bus::topics;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_proto::events::v1::DocumentChanged;
use sea_orm::sea_query::{Expr, Order as SqlOrder};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};

use crate::entities::{chunks, collections, document_pages, documents};

pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;

/// A transcript segment as stored with its document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    pub start: f64,
    pub end: Option<f64>,
    pub speaker: String,
    pub original_speaker: Option<String>,
    pub text: String,
}

/// List filters (REST query of GET /documents and GET /documents/count).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub chat_session_id: Option<String>,
    pub collection_id: Option<String>,
}

/// Paging and order of a document list.
#[derive(Debug, Clone, Default)]
pub struct Order {
    pub offset: u64,
    pub limit: u64,
    pub sort_column: String,
    pub ascending: bool,
    /// Documents of a source chat together, those without one last.
    pub group_by_source_chat: bool,
}

fn sort_column(name: &str) -> ApiResult<documents::Column> {
    Ok(match name {
        "" | "updated_at" => documents::Column::UpdatedAt,
        "created_at" => documents::Column::CreatedAt,
        "name" => documents::Column::Name,
        "size" => documents::Column::Size,
        "page_count" => documents::Column::PageCount,
        "type" => documents::Column::Kind,
        "status" => documents::Column::Status,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid sort_column {other:?}: use updated_at, created_at, name, size, page_count, type or status"
            )));
        }
    })
}

/// Documents the caller may read: its own, and those of public collections (an agent
/// document, of no collection, only its owner).
async fn readable(db: &DatabaseConnection, caller: &Caller) -> ApiResult<Condition> {
    let public: Vec<String> = collections::Entity::find()
        .select_only()
        .column(collections::Column::Id)
        .filter(collections::Column::IsPublic.eq(true))
        .into_tuple()
        .all(db)
        .await?;
    Ok(Condition::any()
        .add(documents::Column::OwnerId.eq(caller.user_id.clone()))
        .add(documents::Column::CollectionId.is_in(public)))
}

async fn filtered(
    db: &DatabaseConnection,
    caller: &Caller,
    filter: &ListFilter,
) -> ApiResult<sea_orm::Select<documents::Entity>> {
    let mut q = documents::Entity::find();
    match &filter.collection_id {
        Some(cid) => {
            crate::collections::get(db, caller, cid).await?;
            q = q.filter(documents::Column::CollectionId.eq(cid.clone()));
        }
        // Without a collection: the caller's own documents.
        None => q = q.filter(documents::Column::OwnerId.eq(caller.user_id.clone())),
    }
    if let Some(session) = &filter.chat_session_id {
        q = q.filter(documents::Column::ChatSessionId.eq(session_id(session)?));
    }
    Ok(q)
}

/// A chat session id as documents store it (a UUID in its hyphenated lowercase form);
/// anything else is a 400.
pub fn session_id(id: &str) -> ApiResult<String> {
    uuid::Uuid::parse_str(id)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| ApiError::bad_request(format!("chat_session_id {id:?} is not a valid UUID")))
}

pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    filter: &ListFilter,
    page: &Order,
) -> ApiResult<Vec<documents::Model>> {
    let column = sort_column(&page.sort_column)?;
    let order = if page.ascending {
        SqlOrder::Asc
    } else {
        SqlOrder::Desc
    };
    let mut q = filtered(db, caller, filter).await?;
    if page.group_by_source_chat {
        // Whole groups per page: documents of a source chat together, those without one
        // last; sort_column orders rows within a group.
        q = q
            .order_by(
                Expr::col(documents::Column::ChatSessionId).is_null(),
                SqlOrder::Asc,
            )
            .order_by(documents::Column::ChatSessionId, SqlOrder::Asc);
    }
    let limit = if page.limit == 0 {
        DEFAULT_LIMIT
    } else {
        page.limit.min(MAX_LIMIT)
    };
    Ok(q.order_by(column, order.clone())
        .order_by(documents::Column::Id, order)
        .offset(page.offset)
        .limit(limit)
        .all(db)
        .await?)
}

pub async fn count(
    db: &DatabaseConnection,
    caller: &Caller,
    filter: &ListFilter,
) -> ApiResult<u64> {
    Ok(filtered(db, caller, filter).await?.count(db).await?)
}

/// The answer for a document that does not exist or is not the caller's to see.
pub fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("document {id} not found"))
}

pub async fn get(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<documents::Model> {
    documents::Entity::find_by_id(id.to_owned())
        .filter(readable(db, caller).await?)
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Bumps a collection's counters and index version after its documents changed.
pub async fn touch_collection<C: ConnectionTrait>(
    conn: &C,
    collection_id: &str,
    count_delta: i64,
    size_delta: i64,
) -> ApiResult<()> {
    // Agent documents belong to no collection.
    if collection_id.is_empty() {
        return Ok(());
    }
    let at = now();
    collections::Entity::update_many()
        .col_expr(
            collections::Column::DocumentCount,
            Expr::col(collections::Column::DocumentCount).add(count_delta),
        )
        .col_expr(
            collections::Column::DocumentSize,
            Expr::col(collections::Column::DocumentSize).add(size_delta),
        )
        .col_expr(
            collections::Column::IndexVersion,
            Expr::col(collections::Column::IndexVersion).add(1),
        )
        .col_expr(collections::Column::UpdatedAt, Expr::value(at))
        // Any document change makes an existing description stale.
        .col_expr(
            collections::Column::DescriptionDirtyAt,
            Expr::value(Some(at)),
        )
        .filter(collections::Column::Id.eq(collection_id))
        .exec(conn)
        .await?;
    Ok(())
}

/// Deletes an owned document with its chunks and vectors.
pub async fn delete(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<documents::Model> {
    let txn = docchat_common::db::begin(db).await?;
    let doc = documents::Entity::find_by_id(id.to_owned())
        .filter(documents::Column::OwnerId.eq(caller.user_id.clone()))
        .one(&txn)
        .await?
        .ok_or_else(|| not_found(id))?;
    chunks::Entity::delete_many()
        .filter(chunks::Column::DocumentId.eq(id))
        .exec(&txn)
        .await?;
    document_pages::Entity::delete_many()
        .filter(document_pages::Column::DocumentId.eq(id))
        .exec(&txn)
        .await?;
    crate::tags::forget_document(&txn, id).await?;
    documents::Entity::delete_by_id(id.to_owned())
        .exec(&txn)
        .await?;
    touch_collection(&txn, &doc.collection_id, -1, -doc.size).await?;
    outbox::enqueue(
        &txn,
        &envelope(
            topics::INGEST_DOCUMENT_DELETED,
            &caller.user_id,
            &DocumentChanged {
                document_id: doc.id.clone(),
                collection_id: doc.collection_id.clone(),
                user_id: caller.user_id.clone(),
            },
        ),
    )
    .await?;
    txn.commit().await?;
    Ok(doc)
}

/// Segments of a transcript; an empty list for every other document.
pub async fn audio_segments(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<Vec<Segment>> {
    let doc = get(db, caller, id).await?;
    Ok(doc
        .segments
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default())
}

/// What an owner changes of a document; absent fields stay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    /// A new file name (the rules of an upload's, [`crate::uploads::clean_filename`]).
    pub name: Option<String>,
    /// Where the document came from; empty clears it.
    pub uri: Option<String>,
    /// The stored JSON of a checked object ([`crate::collection_settings::metadata`]),
    /// replacing the metadata whole.
    pub metadata: Option<String>,
}

/// The most bytes of a document's URI.
pub const MAX_URI_BYTES: usize = 8192;

/// Renames an owned document, sets its URI or replaces its metadata (another user's
/// document is a 404, readable or not). Nothing is stored unless every field is valid.
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    update: Update,
) -> ApiResult<documents::Model> {
    let Update {
        name,
        uri,
        metadata,
    } = update;
    let doc = documents::Entity::find_by_id(id.to_owned())
        .filter(documents::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    if name.is_none() && uri.is_none() && metadata.is_none() {
        return Err(ApiError::bad_request(
            "give a name, a uri or metadata to change",
        ));
    }
    let name = name
        .map(|n| crate::uploads::file_name(&n, "name must be a file name, not empty"))
        .transpose()?;
    let uri = uri.map(|u| u.trim().to_owned());
    if let Some(u) = &uri {
        if u.len() > MAX_URI_BYTES {
            return Err(ApiError::bad_request(format!(
                "uri must be at most {MAX_URI_BYTES} bytes"
            )));
        }
        if u.chars().any(char::is_control) {
            return Err(ApiError::bad_request(
                "uri must not contain control characters",
            ));
        }
    }
    let mut active: documents::ActiveModel = doc.into();
    if let Some(name) = name {
        active.name = Set(name);
    }
    if let Some(uri) = uri {
        active.uri = Set((!uri.is_empty()).then_some(uri));
    }
    if let Some(json) = metadata {
        active.metadata = Set(Some(json));
    }
    active.updated_at = Set(now());
    Ok(active.update(db).await?)
}

/// The most chunks [`chunks_of`] returns.
pub const MAX_DOCUMENT_CHUNKS: u64 = 2000;

/// The chunks of a document the caller may read, in order: at most
/// [`MAX_DOCUMENT_CHUNKS`], and no more than `page_bytes` of text (at least one). With
/// `collection_id`, the document must be in that collection (404 otherwise). Says whether
/// chunks were left out.
pub async fn chunks_of(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    collection_id: Option<&str>,
    page_bytes: u64,
) -> ApiResult<(documents::Model, Vec<chunks::Model>, bool)> {
    let doc = get(db, caller, id).await?;
    if let Some(cid) = collection_id
        && cid != doc.collection_id
    {
        return Err(ApiError::not_found(format!(
            "document {id} is not in collection {cid}"
        )));
    }
    let mut rows = chunks::Entity::find()
        .filter(chunks::Column::DocumentId.eq(id))
        .order_by_asc(chunks::Column::ChunkIndex)
        .order_by_asc(chunks::Column::Id)
        .limit(MAX_DOCUMENT_CHUNKS + 1)
        .all(db)
        .await?;
    let mut cut = rows.len() as u64 > MAX_DOCUMENT_CHUNKS;
    let fit = docchat_common::limits::fit(
        rows.iter()
            .take(MAX_DOCUMENT_CHUNKS as usize)
            .map(|c| c.text.len() as u64),
        page_bytes,
    );
    if fit < rows.len() {
        cut = true;
        rows.truncate(fit);
    }
    for chunk in &mut rows {
        chunk.embedding = Vec::new();
    }
    Ok((doc, rows, cut))
}

/// The collections of a document the caller may read (404 otherwise): the one it is in,
/// when the caller may read that (an agent's document is in none), paged by `offset` and
/// `limit` (0: no limit).
pub async fn collections_of(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    offset: u64,
    limit: u64,
) -> ApiResult<Vec<crate::collections::CollectionView>> {
    let doc = get(db, caller, id).await?;
    let found = crate::collections::visible(db, caller, &doc.collection_id).await?;
    Ok(found
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(if limit == 0 {
            usize::MAX
        } else {
            usize::try_from(limit).unwrap_or(usize::MAX)
        })
        .collect())
}
