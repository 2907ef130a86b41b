//! Collections: create, list, get, delete, and what the client keeps with them (settings,
//! chat settings, metadata), scoped to what the caller may see.

use docchat_common::bus::topics;
use std::collections::HashMap;

use docchat_common::Caller;
use docchat_common::bus::envelope;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::settings::Resolved;
use docchat_common::time::now;
use docchat_common::{db, outbox};
use docchat_proto::events::v1::CollectionDeleted;
use sea_orm::sea_query::{Expr, Func, LikeExpr, Order};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::collection_settings::{CollectionSettings, read_collection_settings};
use crate::entities::{chunks, collection_sessions, collections, documents};

/// The embedder a collection uses unless it names another.
pub const DEFAULT_EMBEDDING_MODEL: &str = "all-MiniLM-L6-v2";
pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;

/// The runtime limits a new collection must stay within; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// collection_limit: collections in the deployment.
    pub system: Option<i64>,
    /// collection_limit_per_user: collections of one owner.
    pub per_user: Option<i64>,
}

impl Limits {
    pub fn of(resolved: &Resolved) -> Limits {
        Limits {
            system: resolved.limit("collection_limit"),
            per_user: resolved.limit("collection_limit_per_user"),
        }
    }
}

/// The refusal of a runtime limit (403).
pub fn limit_reached(what: &str, limit: i64) -> ApiError {
    ApiError::new(
        ErrorCode::Forbidden,
        format!("{what} limit reached ({limit})"),
    )
}

/// A collection with the counts derived from other tables.
#[derive(Debug, Clone)]
pub struct CollectionView {
    pub collection: collections::Model,
    pub sessions_count: i64,
    pub user_count: i64,
}

/// The collections `caller` may read: their own and the public ones (the one copy of the
/// rule; search and the collection routes use it).
pub(crate) fn visible_to(caller: &Caller) -> Condition {
    Condition::any()
        .add(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .add(collections::Column::IsPublic.eq(true))
}

async fn views(
    db: &DatabaseConnection,
    rows: Vec<collections::Model>,
) -> ApiResult<Vec<CollectionView>> {
    let ids: Vec<String> = rows.iter().map(|c| c.id.clone()).collect();
    let counts: HashMap<String, i64> = collection_sessions::Entity::find()
        .select_only()
        .column(collection_sessions::Column::CollectionId)
        .column_as(
            Expr::col(collection_sessions::Column::SessionId).count(),
            "n",
        )
        .filter(collection_sessions::Column::CollectionId.is_in(ids))
        .filter(collection_sessions::Column::Deleted.eq(false))
        .group_by(collection_sessions::Column::CollectionId)
        .into_tuple::<(String, i64)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    Ok(rows
        .into_iter()
        .map(|c| CollectionView {
            sessions_count: counts.get(&c.id).copied().unwrap_or(0),
            // Sharing arrives with the sharing endpoints; until then only the owner.
            user_count: 1,
            collection: c,
        })
        .collect())
}

/// What a new collection keeps for the client: its settings and chat settings, each the
/// stored JSON of a checked object ([`crate::collection_settings`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kept {
    pub collection_settings: Option<String>,
    pub chat_settings: Option<String>,
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
    description: &str,
    embedding_model: &str,
    limits: Limits,
    kept: Kept,
) -> ApiResult<CollectionView> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    if name.chars().count() > 255 {
        return Err(ApiError::bad_request("name must be at most 255 characters"));
    }
    if description.chars().count() > 100_000 {
        return Err(ApiError::bad_request(
            "description must be at most 100000 characters",
        ));
    }
    let embedding_model = match embedding_model.trim() {
        "" => DEFAULT_EMBEDDING_MODEL,
        m => m,
    };
    let at = now();
    // The insert and the counts are one step: on PostgreSQL creates under a limit take
    // one lock, on SQLite the insert's write lock keeps every other writer out until the
    // commit. Past a limit the transaction rolls back, insert and all.
    let txn = docchat_common::db::begin(db).await?;
    if limits != Limits::default() {
        db::serialize_on(&txn, "ingest.collections").await?;
    }
    let row = collections::ActiveModel {
        id: Set(docchat_common::ids::new_id()),
        owner_id: Set(caller.user_id.clone()),
        owner_username: Set(caller.username.clone()),
        name: Set(name.to_owned()),
        description: Set(description.to_owned()),
        embedding_model: Set(embedding_model.to_owned()),
        is_public: Set(false),
        status: Set("active".to_owned()),
        document_count: Set(0),
        document_size: Set(0),
        created_at: Set(at),
        updated_at: Set(at),
        description_auto_generated: Set(false),
        description_generated_at: Set(None),
        description_dirty_at: Set(None),
        description_generation_started_at: Set(None),
        index_version: Set(0),
        collection_settings: Set(kept.collection_settings),
        chat_settings: Set(kept.chat_settings),
        metadata: Set(None),
    }
    .insert(&txn)
    .await?;
    if let Some(limit) = limits.system
        && collections::Entity::find().count(&txn).await? as i64 > limit
    {
        txn.rollback().await?;
        return Err(limit_reached("collection", limit));
    }
    if let Some(limit) = limits.per_user
        && collections::Entity::find()
            .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
            .count(&txn)
            .await? as i64
            > limit
    {
        txn.rollback().await?;
        return Err(limit_reached("per-user collection", limit));
    }
    txn.commit().await?;
    Ok(CollectionView {
        collection: row,
        sessions_count: 0,
        user_count: 1,
    })
}

/// Sort columns a list accepts.
fn sort_column(name: &str) -> ApiResult<collections::Column> {
    Ok(match name {
        "" | "updated_at" => collections::Column::UpdatedAt,
        "created_at" => collections::Column::CreatedAt,
        "name" => collections::Column::Name,
        "document_count" => collections::Column::DocumentCount,
        "document_size" => collections::Column::DocumentSize,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid sort_column {other:?}: use updated_at, created_at, name, document_count or document_size"
            )));
        }
    })
}

/// The collections the caller sees, in the order asked. A page holds at most `page_bytes`
/// of names and descriptions (at least one collection), whatever its limit; the flag says
/// whether it stopped there.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    offset: u64,
    limit: u64,
    sort: &str,
    ascending: bool,
    page_bytes: u64,
) -> ApiResult<(Vec<CollectionView>, bool)> {
    let column = sort_column(sort)?;
    let order = if ascending { Order::Asc } else { Order::Desc };
    let limit = if limit == 0 {
        DEFAULT_LIMIT
    } else {
        limit.min(MAX_LIMIT)
    };
    let page = collections::Entity::find()
        .filter(visible_to(caller))
        .order_by(column, order.clone())
        .order_by(collections::Column::Id, order)
        .offset(offset)
        .limit(limit);
    use collections::Column as C;
    let sized = [C::Name, C::Description, C::OwnerUsername, C::EmbeddingModel];
    let page = docchat_common::limits::page_by_size(db, page, C::Id, &sized, page_bytes).await?;
    Ok((views(db, page.rows).await?, page.cut))
}

/// How many collections the caller owns (the client's count_collections).
pub async fn count_owned(db: &DatabaseConnection, caller: &Caller) -> ApiResult<u64> {
    Ok(collections::Entity::find()
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .count(db)
        .await?)
}

/// A page of every user's collections (an administrator's list; the caller's permission is
/// checked by the RPC), in the order asked, those whose name, id or owner's username
/// contains `filter` (any case) when it is not empty. Paged as [`list`].
pub async fn list_all(
    db: &DatabaseConnection,
    offset: u64,
    limit: u64,
    sort: &str,
    ascending: bool,
    filter: &str,
    page_bytes: u64,
) -> ApiResult<(Vec<CollectionView>, bool)> {
    let column = sort_column(sort)?;
    let order = if ascending { Order::Asc } else { Order::Desc };
    let limit = if limit == 0 {
        DEFAULT_LIMIT
    } else {
        limit.min(MAX_LIMIT)
    };
    let mut query = collections::Entity::find();
    let filter = filter.trim();
    if !filter.is_empty() {
        docchat_common::limits::check_name("filter", filter)?;
        let pattern = format!("%{}%", like_escaped(&filter.to_lowercase()));
        let mut any = Condition::any();
        use collections::Column as C;
        for column in [C::Name, C::Id, C::OwnerUsername] {
            any = any.add(
                Expr::expr(Func::lower(Expr::col(column)))
                    .like(LikeExpr::new(pattern.clone()).escape('\\')),
            );
        }
        query = query.filter(any);
    }
    let page = query
        .order_by(column, order.clone())
        .order_by(collections::Column::Id, order)
        .offset(offset)
        .limit(limit);
    use collections::Column as C;
    let sized = [C::Name, C::Description, C::OwnerUsername, C::EmbeddingModel];
    let page = docchat_common::limits::page_by_size(db, page, C::Id, &sized, page_bytes).await?;
    Ok((views(db, page.rows).await?, page.cut))
}

/// `text` with LIKE's wildcards and escape character taken literally (escape `\`).
fn like_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("collection {id} not found"))
}

pub async fn get(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<CollectionView> {
    let row = collections::Entity::find_by_id(id.to_owned())
        .filter(visible_to(caller))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    views(db, vec![row])
        .await?
        .pop()
        .ok_or_else(|| not_found(id))
}

/// The collection when the caller may read it (none otherwise: no error).
pub async fn visible(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<Option<CollectionView>> {
    if id.is_empty() {
        return Ok(None);
    }
    let Some(row) = collections::Entity::find_by_id(id.to_owned())
        .filter(visible_to(caller))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    Ok(views(db, vec![row]).await?.pop())
}

/// A collection's stored objects as JSON text (`{}` for one never set).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub collection_settings: String,
    pub chat_settings: String,
    pub metadata: String,
}

/// The settings, chat settings and metadata of a collection the caller may read.
pub async fn stored(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<Stored> {
    let row = collections::Entity::find_by_id(id.to_owned())
        .filter(visible_to(caller))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    let or_empty = |c: Option<String>| c.unwrap_or_else(|| "{}".to_owned());
    Ok(Stored {
        collection_settings: or_empty(row.collection_settings),
        chat_settings: or_empty(row.chat_settings),
        metadata: or_empty(row.metadata),
    })
}

/// New values for some of a collection's stored objects (each the stored JSON of a checked
/// object); absent ones stay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredChanges {
    pub collection_settings: Option<String>,
    pub chat_settings: Option<String>,
    pub metadata: Option<String>,
}

/// Replaces the given objects of an owned collection whole (another user's collection is a
/// 404, public or not).
pub async fn store(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    changes: StoredChanges,
) -> ApiResult<()> {
    let StoredChanges {
        collection_settings,
        chat_settings,
        metadata,
    } = changes;
    let row = collections::Entity::find_by_id(id.to_owned())
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    if collection_settings.is_none() && chat_settings.is_none() && metadata.is_none() {
        return Err(ApiError::bad_request("nothing to change"));
    }
    let mut active: collections::ActiveModel = row.into();
    if let Some(json) = collection_settings {
        active.collection_settings = Set(Some(json));
    }
    if let Some(json) = chat_settings {
        active.chat_settings = Set(Some(json));
    }
    if let Some(json) = metadata {
        active.metadata = Set(Some(json));
    }
    active.updated_at = Set(now());
    active.update(db).await?;
    Ok(())
}

/// The settings of a collection the caller owns, which an ingestion into it takes as its
/// defaults; none for a collection without them, or not the caller's (the ingestion itself
/// then answers 404).
pub async fn ingest_defaults(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<Option<CollectionSettings>> {
    let settings: Option<Option<String>> = collections::Entity::find_by_id(id.to_owned())
        .select_only()
        .column(collections::Column::CollectionSettings)
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .into_tuple()
        .one(db)
        .await?;
    Ok(read_collection_settings(settings.flatten().as_deref()))
}

/// Deletes an owned collection and announces it (`ingest.collection.deleted`) in the same
/// transaction.
pub async fn delete(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    let deleted = collections::Entity::delete_many()
        .filter(collections::Column::Id.eq(id))
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .exec(&txn)
        .await?;
    if deleted.rows_affected == 0 {
        return Err(not_found(id));
    }
    collection_sessions::Entity::delete_many()
        .filter(collection_sessions::Column::CollectionId.eq(id))
        .exec(&txn)
        .await?;
    // Its documents go with it: chunks (and so vectors and the lexical index) first.
    chunks::Entity::delete_many()
        .filter(chunks::Column::CollectionId.eq(id))
        .exec(&txn)
        .await?;
    let doc_ids: Vec<String> = documents::Entity::find()
        .select_only()
        .column(documents::Column::Id)
        .filter(documents::Column::CollectionId.eq(id))
        .into_tuple()
        .all(&txn)
        .await?;
    crate::entities::document_pages::Entity::delete_many()
        .filter(crate::entities::document_pages::Column::DocumentId.is_in(doc_ids.clone()))
        .exec(&txn)
        .await?;
    crate::entities::document_tags::Entity::delete_many()
        .filter(crate::entities::document_tags::Column::DocumentId.is_in(doc_ids))
        .exec(&txn)
        .await?;
    documents::Entity::delete_many()
        .filter(documents::Column::CollectionId.eq(id))
        .exec(&txn)
        .await?;
    let event = envelope(
        topics::INGEST_COLLECTION_DELETED,
        &caller.user_id,
        &CollectionDeleted {
            collection_id: id.to_owned(),
            user_id: caller.user_id.clone(),
        },
    );
    outbox::enqueue(&txn, &event).await?;
    txn.commit().await?;
    Ok(())
}

/// Renames an owned collection or sets its description; a description from a user makes
/// `description_auto_generated` false and stops regeneration.
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    name: Option<String>,
    description: Option<String>,
) -> ApiResult<CollectionView> {
    let row = collections::Entity::find_by_id(id.to_owned())
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    if name.is_none() && description.is_none() {
        return Err(ApiError::bad_request(
            "give a name or a description to change",
        ));
    }
    let mut active: collections::ActiveModel = row.into();
    if let Some(name) = name {
        let name = name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 255 {
            return Err(ApiError::bad_request("name must be 1 to 255 characters"));
        }
        active.name = Set(name);
    }
    if let Some(description) = description {
        if description.chars().count() > 100_000 {
            return Err(ApiError::bad_request(
                "description must be at most 100000 characters",
            ));
        }
        active.description = Set(description);
        active.description_auto_generated = Set(false);
        active.description_dirty_at = Set(None);
    }
    active.updated_at = Set(now());
    let row = active.update(db).await?;
    views(db, vec![row])
        .await?
        .pop()
        .ok_or_else(|| not_found(id))
}

/// Number of live sessions of a collection (for tests and diagnostics).
pub async fn sessions_count(db: &DatabaseConnection, collection_id: &str) -> ApiResult<u64> {
    Ok(collection_sessions::Entity::find()
        .filter(collection_sessions::Column::CollectionId.eq(collection_id))
        .filter(collection_sessions::Column::Deleted.eq(false))
        .count(db)
        .await?)
}
