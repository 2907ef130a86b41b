//! Uploads: a client stream of bytes becomes a blob and an `uploads` row owned by the caller.

use std::collections::HashMap;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::time::now;
use docchat_proto::ingest::v1::UploadChunk;
use docchat_proto::ingest::v1::upload_chunk::Part;
use futures::{Stream, StreamExt};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::blobs::BlobStore;
use crate::entities::{documents, jobs, uploads};

/// The most uploads [`pending`] answers.
pub const MAX_PENDING_LISTED: u64 = 10_000;

/// The name a file is known by: its last path component, without control characters.
pub fn clean_filename(name: &str) -> ApiResult<String> {
    file_name(name, "the upload needs a file name")
}

/// [`clean_filename`]'s rules, with `empty` as the answer for a name that leaves nothing
/// (a document's new name says so in its own words).
pub fn file_name(name: &str, empty: &str) -> ApiResult<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    let clean: String = base.chars().filter(|c| !c.is_control()).collect();
    if clean.is_empty() || clean == "." || clean == ".." {
        return Err(ApiError::bad_request(empty));
    }
    if clean.chars().count() > 255 {
        return Err(ApiError::bad_request(
            "file names are at most 255 characters",
        ));
    }
    Ok(clean)
}

/// A blob written from a stream of pieces, not yet recorded in `uploads`.
#[derive(Debug, Clone)]
pub struct Received {
    /// The blob's id, which its `uploads` row takes.
    pub id: String,
    pub size: i64,
    pub sha256: String,
}

/// Writes a stream of byte pieces into a new blob; past `max_bytes` it is 413 and nothing is
/// kept (what was written goes with the writer).
pub async fn write_blob<S>(blobs: &BlobStore, mut pieces: S, max_bytes: u64) -> ApiResult<Received>
where
    S: Stream<Item = ApiResult<Vec<u8>>> + Unpin,
{
    let id = docchat_common::ids::new_id();
    let mut writer = blobs.writer(&id).await?;
    while let Some(bytes) = pieces.next().await {
        let bytes = bytes?;
        if writer.size() + bytes.len() as u64 > max_bytes {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("file is larger than the {} MB limit", max_bytes / 1_000_000),
            ));
        }
        writer.write(&bytes).await?;
    }
    let size = i64::try_from(writer.size()).unwrap_or(i64::MAX);
    let sha256 = writer.finish().await?;
    Ok(Received { id, size, sha256 })
}

/// The `uploads` row of a received blob, owned by `caller`.
pub fn row(caller: &Caller, filename: String, blob: &Received) -> uploads::ActiveModel {
    uploads::ActiveModel {
        id: Set(blob.id.clone()),
        owner_id: Set(caller.user_id.clone()),
        filename: Set(filename),
        size: Set(blob.size),
        sha256: Set(blob.sha256.clone()),
        created_at: Set(now()),
    }
}

pub async fn receive<S>(
    db: &DatabaseConnection,
    blobs: &BlobStore,
    caller: &Caller,
    mut stream: S,
    max_bytes: u64,
) -> ApiResult<uploads::Model>
where
    S: Stream<Item = Result<UploadChunk, tonic::Status>> + Unpin,
{
    let filename = match stream.next().await {
        Some(Ok(UploadChunk {
            part: Some(Part::Meta(meta)),
        })) => clean_filename(&meta.filename)?,
        Some(Err(status)) => return Err(status.into()),
        _ => return Err(ApiError::bad_request("an upload starts with its metadata")),
    };
    let pieces = stream.map(|message| match message?.part {
        Some(Part::Data(bytes)) => Ok(bytes),
        Some(Part::Meta(_)) => Err(ApiError::bad_request("metadata sent twice")),
        None => Ok(Vec::new()),
    });
    let blob = write_blob(blobs, pieces, max_bytes).await?;
    match row(caller, filename, &blob).insert(db).await {
        Ok(row) => Ok(row),
        Err(e) => {
            let _ = blobs.delete(&blob.id).await;
            Err(e.into())
        }
    }
}

/// The caller's uploads `ids` (distinct), in that order; 404 naming the first that is not
/// the caller's (or does not exist).
pub async fn owned_all(
    db: &DatabaseConnection,
    caller: &Caller,
    ids: &[&str],
) -> ApiResult<Vec<uploads::Model>> {
    let mut found: HashMap<String, uploads::Model> = uploads::Entity::find()
        .filter(uploads::Column::Id.is_in(ids.iter().copied()))
        .filter(uploads::Column::OwnerId.eq(caller.user_id.clone()))
        .all(db)
        .await?
        .into_iter()
        .map(|row| (row.id.clone(), row))
        .collect();
    ids.iter()
        .map(|id| {
            found
                .remove(*id)
                .ok_or_else(|| ApiError::not_found(format!("upload {id} not found")))
        })
        .collect()
}

/// The caller's uploads that no document and no job names yet (uploaded, not ingested),
/// newest first, at most [`MAX_PENDING_LISTED`].
pub async fn pending(db: &DatabaseConnection, caller: &Caller) -> ApiResult<Vec<uploads::Model>> {
    use sea_orm::sea_query::Query;
    let made_documents = Query::select()
        .column(documents::Column::UploadId)
        .from(documents::Entity)
        .and_where(documents::Column::UploadId.is_not_null())
        .and_where(documents::Column::OwnerId.eq(caller.user_id.clone()))
        .to_owned();
    let named_by_jobs = Query::select()
        .column(jobs::Column::UploadId)
        .from(jobs::Entity)
        .and_where(jobs::Column::UploadId.is_not_null())
        .and_where(jobs::Column::OwnerId.eq(caller.user_id.clone()))
        .to_owned();
    Ok(uploads::Entity::find()
        .filter(uploads::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(uploads::Column::Id.not_in_subquery(made_documents))
        .filter(uploads::Column::Id.not_in_subquery(named_by_jobs))
        .order_by_desc(uploads::Column::CreatedAt)
        .order_by_desc(uploads::Column::Id)
        .limit(MAX_PENDING_LISTED)
        .all(db)
        .await?)
}

/// Removes the caller's upload `id`: the row, and the blob unless a document was made from
/// it (the document reads its bytes from that blob). 404 for another user's or an unknown
/// id; 409 while a queued or running job ingests it (cancel the job first).
pub async fn delete(
    db: &DatabaseConnection,
    blobs: &BlobStore,
    caller: &Caller,
    id: &str,
) -> ApiResult<()> {
    let not_found = || ApiError::not_found(format!("upload {id} not found"));
    let upload = uploads::Entity::find_by_id(id.to_owned())
        .filter(uploads::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(not_found)?;
    let ingesting = jobs::Entity::find()
        .filter(jobs::Column::UploadId.eq(upload.id.clone()))
        .filter(jobs::Column::Status.is_in([crate::jobs::QUEUED, crate::jobs::RUNNING]))
        .one(db)
        .await?;
    if let Some(job) = ingesting {
        return Err(ApiError::conflict(format!(
            "upload {id} is being ingested by job {}: cancel the job first",
            job.id
        )));
    }
    let used = documents::Entity::find()
        .filter(documents::Column::UploadId.eq(upload.id.clone()))
        .one(db)
        .await?
        .is_some();
    uploads::Entity::delete_by_id(upload.id.clone())
        .exec(db)
        .await?;
    if !used && let Err(e) = blobs.delete(&upload.id).await {
        // The row is gone, so nothing can reach the blob: an orphan file, logged.
        tracing::warn!(upload_id = %upload.id, error = %e, "could not remove a deleted upload's file");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::clean_filename;

    #[test]
    fn file_names_lose_their_paths() {
        assert_eq!(clean_filename("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(
            clean_filename("C:\\docs\\report.pdf").unwrap(),
            "report.pdf"
        );
        assert_eq!(clean_filename("a\u{0}b.txt").unwrap(), "ab.txt");
        assert!(clean_filename("dir/").is_err());
        assert!(clean_filename("..").is_err());
    }
}
