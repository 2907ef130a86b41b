//! Documents: listing, counting, reading, deleting, and transcript segments.

use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::bus::topics;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_proto::events::v1::DocumentChanged;
use sea_orm::sea_query::{Expr, Order as SqlOrder};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect,
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
