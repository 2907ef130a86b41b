//! Starting an ingestion: checks the upload, the collection and the runtime limits, then
//! queues the job (and its announcements) in one transaction.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::settings::Resolved;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, TransactionTrait,
};

use crate::entities::{collections, documents, jobs as job_rows};
use crate::jobs::{self, Fairness, IngestParams};

fn limit_reached(what: &str, limit: i64) -> ApiError {
    ApiError::new(
        ErrorCode::Forbidden,
        format!("{what} limit reached ({limit})"),
    )
}

/// Refuses a new collection past collection_limit or collection_limit_per_user.
pub async fn check_collection_limits(
    db: &DatabaseConnection,
    caller: &Caller,
    resolved: &Resolved,
) -> ApiResult<()> {
    if let Some(limit) = resolved.limit("collection_limit") {
        let total = collections::Entity::find().count(db).await?;
        if total as i64 >= limit {
            return Err(limit_reached("collection", limit));
        }
    }
    if let Some(limit) = resolved.limit("collection_limit_per_user") {
        let mine = collections::Entity::find()
            .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
            .count(db)
            .await?;
        if mine as i64 >= limit {
            return Err(limit_reached("per-user collection", limit));
        }
    }
    Ok(())
}

/// Queues the ingestion of an upload into a collection.
pub async fn start(
    db: &DatabaseConnection,
    caller: &Caller,
    resolved: &Resolved,
    fairness: Fairness,
    upload_id: &str,
    collection_id: &str,
    params: &IngestParams,
) -> ApiResult<job_rows::Model> {
    if collection_id.is_empty() {
        return Err(ApiError::bad_request("collection_id is required"));
    }
    let upload = crate::uploads::owned(db, caller, upload_id).await?;
    // Only the owner adds documents to a collection.
    let collection = collections::Entity::find_by_id(collection_id.to_owned())
        .filter(collections::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("collection {collection_id} not found")))?;

    if let Some(limit) = resolved.limit("document_limit_per_user") {
        let docs = documents::Entity::find()
            .filter(documents::Column::OwnerId.eq(caller.user_id.clone()))
            .count(db)
            .await?;
        let pending = job_rows::Entity::find()
            .filter(job_rows::Column::OwnerId.eq(caller.user_id.clone()))
            .filter(job_rows::Column::Status.is_in(["queued", "running"]))
            .count(db)
            .await?;
        if (docs + pending) as i64 >= limit {
            return Err(limit_reached("per-user document", limit));
        }
    }
    if let Some(limit) = resolved.limit("default_collection_size_limit")
        && collection.document_size + upload.size > limit
    {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "collection size limit reached: {} bytes stored + {} new > {limit}",
                collection.document_size, upload.size
            ),
        ));
    }

    let queue = jobs::queue_for(db, &caller.user_id, fairness).await?;
    let txn = db.begin().await?;
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
    txn.commit().await?;
    Ok(job)
}
