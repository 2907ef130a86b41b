//! Starting ingestions: checks every upload and the collection, then queues the jobs (and
//! their announcements) and checks the runtime limits for all of them in one transaction,
//! so a refused list queues nothing.

use std::collections::HashSet;

use docchat_common::Caller;
use docchat_common::db;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::settings::Resolved;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter,
    Statement,
};

use crate::collections::limit_reached;
use crate::entities::{collections, jobs as job_rows};
use crate::jobs::{self, Fairness, IngestParams};

/// What counts against document_limit_per_user: the owner's documents and the jobs that
/// will make one, in one statement (one snapshot, so a job turning into its document
/// between two counts cannot be missed). Documents an agent generated (with a
/// chat_session_id) count against agents_document_limit_per_user instead.
async fn documents_held<C: ConnectionTrait>(conn: &C, owner: &str) -> ApiResult<i64> {
    let backend = conn.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => {
            "SELECT (SELECT COUNT(*) FROM documents \
               WHERE owner_id = $1 AND chat_session_id IS NULL) + \
             (SELECT COUNT(*) FROM jobs WHERE owner_id = $1 AND status IN ('queued', 'running'))"
        }
        _ => {
            "SELECT (SELECT COUNT(*) FROM documents \
               WHERE owner_id = ?1 AND chat_session_id IS NULL) + \
             (SELECT COUNT(*) FROM jobs WHERE owner_id = ?1 AND status IN ('queued', 'running'))"
        }
    };
    let row = conn
        .query_one(Statement::from_sql_and_values(
            backend,
            sql,
            [owner.to_owned().into()],
        ))
        .await?
        .ok_or_else(|| ApiError::internal("counting documents", "no row"))?;
    Ok(row.try_get_by_index::<i64>(0)?)
}

/// Queues the ingestion of several uploads into a collection, all or none: every upload is
/// the caller's (else 404 naming the first that is not) and the whole list fits the
/// per-user document limit (403) and the collection's size limit (413), or no job is
/// written. The jobs are written in one transaction, in the order of `upload_ids`; an id
/// named twice is ingested once.
pub async fn start_many(
    db: &DatabaseConnection,
    caller: &Caller,
    resolved: &Resolved,
    fairness: Fairness,
    upload_ids: &[String],
    collection_id: &str,
    params: &IngestParams,
) -> ApiResult<Vec<job_rows::Model>> {
    if collection_id.is_empty() {
        return Err(ApiError::bad_request("collection_id is required"));
    }
    let mut seen = HashSet::new();
    let ids: Vec<&str> = upload_ids
        .iter()
        .map(String::as_str)
        .filter(|id| seen.insert(*id))
        .collect();
    if ids.is_empty() {
        return Err(ApiError::bad_request("no upload id given"));
    }
    let uploads = crate::uploads::owned_all(db, caller, &ids).await?;
    // Only the owner adds documents to a collection.
    let collection = collections::Entity::find_by_id(collection_id.to_owned())
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("collection {collection_id} not found")))?;

    let limit = resolved.limit("document_limit_per_user");
    // A list longer than the limit cannot fit whatever the count: refused without writing.
    if let Some(limit) = limit
        && i64::try_from(uploads.len()).unwrap_or(i64::MAX) > limit
    {
        return Err(limit_reached("per-user document", limit));
    }
    let queues = jobs::queues_for(db, &caller.user_id, fairness, uploads.len()).await?;
    // The jobs are written before the count, in one transaction: on PostgreSQL a lock per
    // owner orders that owner's ingestions, on SQLite the insert's write lock keeps every
    // other writer out until the commit. Past the limit every job is rolled back.
    let txn = docchat_common::db::begin(db).await?;
    if limit.is_some() {
        db::serialize_on(&txn, &format!("ingest.documents:{}", caller.user_id)).await?;
    }
    let mut queued = Vec::with_capacity(uploads.len());
    for (upload, queue) in uploads.iter().zip(queues) {
        let job = jobs::enqueue(
            &txn,
            caller,
            queue,
            &collection.id,
            &collection.name,
            &upload.id,
            params,
        )
        .await?;
        queued.push(job);
    }
    if let Some(limit) = limit
        && documents_held(&txn, &caller.user_id).await? > limit
    {
        txn.rollback().await?;
        return Err(limit_reached("per-user document", limit));
    }
    let new_bytes = uploads
        .iter()
        .fold(0i64, |sum, upload| sum.saturating_add(upload.size));
    if let Some(limit) = resolved.limit("default_collection_size_limit")
        && collection.document_size.saturating_add(new_bytes) > limit
    {
        txn.rollback().await?;
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "collection size limit reached: {} bytes stored + {new_bytes} new > {limit}",
                collection.document_size
            ),
        ));
    }
    txn.commit().await?;
    Ok(queued)
}
