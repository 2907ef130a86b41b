//! The storage transaction: a job's document, chunks, vectors, counters, events and
//! completion, written all together or not at all.

use docchat_common::bus::{envelope, topics};
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_parsers::ParsedDocument;
use docchat_proto::events::v1::{DocumentChanged, LlmUsage};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

use super::Workers;
use super::extras::Extras;
use crate::costs;
use crate::documents::{Segment, touch_collection};
use crate::entities::{chunks, collections, document_pages, documents, jobs, uploads};
use crate::index::encode;
use crate::jobs as jobq;
use crate::pages::encode_page_starts;

/// What the pipeline made of a job's upload, ready to be stored.
pub(super) struct Ingested {
    pub(super) upload: uploads::Model,
    pub(super) collection: collections::Model,
    pub(super) parsed: ParsedDocument,
    /// How its pages were read, when some needed text recognition.
    pub(super) reading: Option<super::reading::Reading>,
    pub(super) pieces: Vec<docchat_parsers::Chunk>,
    pub(super) vectors: Vec<Vec<f32>>,
    pub(super) extras: Extras,
}

/// How a job's storage ended.
pub(super) enum Outcome {
    Done,
    /// The job is no longer ours (lease lost or canceled): leave it alone.
    Lost,
}

impl Workers {
    /// Stores `doc` for `job` in one transaction, fenced by the job's attempt; the model calls
    /// in `calls` are booked with it (and cleared once it is committed).
    pub(super) async fn store(
        &self,
        job: &jobs::Model,
        doc: &Ingested,
        calls: &mut Vec<LlmUsage>,
    ) -> ApiResult<Outcome> {
        let Ingested {
            upload,
            collection,
            parsed,
            reading,
            pieces,
            vectors,
            extras,
        } = doc;
        // One transaction: document, chunks, counters, job completion, events.
        let txn = docchat_common::db::begin(&self.db).await?;
        let at = now();
        let document_id = docchat_common::ids::new_id();
        let segments: Vec<Segment> = parsed
            .segments
            .iter()
            .map(|s| Segment {
                start: s.start,
                end: s.end,
                speaker: s.speaker.clone(),
                original_speaker: s.original_speaker.clone(),
                text: s.text.clone(),
            })
            .collect();
        // The job's errors: pages that could not be read, then what the extras noted.
        let notes: Vec<String> = reading
            .iter()
            .flat_map(|r| r.notes())
            .chain(extras.notes.iter().cloned())
            .map(|n| jobq::error_line(&n))
            .collect();
        // Fencing: only the worker holding this attempt may complete the job.
        let completed = jobs::Entity::update_many()
            .col_expr(
                jobs::Column::Errors,
                sea_orm::sea_query::Expr::value(
                    serde_json::to_string(&notes).unwrap_or_else(|_| "[]".into()),
                ),
            )
            .col_expr(
                jobs::Column::Status,
                sea_orm::sea_query::Expr::value("completed"),
            )
            .col_expr(
                jobs::Column::Progress,
                sea_orm::sea_query::Expr::value(1.0f64),
            )
            .col_expr(
                jobs::Column::DocumentId,
                sea_orm::sea_query::Expr::value(Some(document_id.clone())),
            )
            .col_expr(
                jobs::Column::FinishedAt,
                sea_orm::sea_query::Expr::value(Some(at)),
            )
            .col_expr(jobs::Column::UpdatedAt, sea_orm::sea_query::Expr::value(at))
            .col_expr(
                jobs::Column::LeaseUntil,
                sea_orm::sea_query::Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
            )
            .filter(jobs::Column::Id.eq(job.id.clone()))
            .filter(jobs::Column::Status.eq("running"))
            .filter(jobs::Column::Attempts.eq(job.attempts))
            .exec(&txn)
            .await?;
        if completed.rows_affected != 1 {
            txn.rollback().await?;
            return Ok(Outcome::Lost);
        }
        if collections::Entity::find_by_id(collection.id.clone())
            .one(&txn)
            .await?
            .is_none()
        {
            return Err(ApiError::bad_request("the collection was deleted"));
        }
        documents::ActiveModel {
            id: Set(document_id.clone()),
            owner_id: Set(job.owner_id.clone()),
            owner_username: Set(job.owner_username.clone()),
            collection_id: Set(collection.id.clone()),
            name: Set(upload.filename.clone()),
            // An image is named by its format (`png`, `jpg`, ...), as an agent's image is.
            kind: Set(match parsed.kind {
                docchat_parsers::DocumentKind::Image => {
                    crate::agent_files::kind_of(&upload.filename)
                }
                kind => kind.as_str().to_owned(),
            }),
            size: Set(upload.size),
            page_count: Set(i64::from(parsed.page_count)),
            status: Set("completed".to_owned()),
            upload_id: Set(Some(upload.id.clone())),
            chat_session_id: Set(None),
            summary: Set(extras.summary.clone()),
            questions: Set(extras
                .questions
                .as_ref()
                .map(|q| serde_json::to_string(q).unwrap_or_default())),
            segments: Set((!segments.is_empty())
                .then(|| serde_json::to_string(&segments).unwrap_or_default())),
            page_sources: Set(reading.as_ref().map(|r| r.sources_json())),
            message: Set(reading.as_ref().and_then(|r| r.message())),
            metadata: Set(None),
            uri: Set(None),
            created_at: Set(at),
            updated_at: Set(at),
        }
        .insert(&txn)
        .await?;
        let rows: Vec<chunks::ActiveModel> = pieces
            .iter()
            .zip(vectors)
            .map(|(c, v)| chunks::ActiveModel {
                document_id: Set(document_id.clone()),
                collection_id: Set(collection.id.clone()),
                chunk_index: Set(i32::try_from(c.index).unwrap_or(i32::MAX)),
                text: Set(c.text.clone()),
                pages: Set(c
                    .pages
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")),
                // one page: nothing to attribute (NULL cites every page)
                page_starts: Set(
                    (c.page_starts.len() > 1).then(|| encode_page_starts(&c.page_starts))
                ),
                heading: Set(c.heading.clone()),
                start_time: Set(c.start_time),
                end_time: Set(c.end_time),
                embedding: Set(encode(v)),
                ..Default::default()
            })
            .collect();
        for batch in rows.chunks(200) {
            chunks::Entity::insert_many(batch.to_vec())
                .exec(&txn)
                .await?;
        }
        // The text by page, for reading a document back (an MCP client's get_document);
        // a transcript's one page holds its segments' lines.
        let pages: Vec<document_pages::ActiveModel> = parsed
            .pages
            .iter()
            .map(|p| (p.number, p.text()))
            .filter(|(_, text)| !text.is_empty())
            .map(|(number, text)| document_pages::ActiveModel {
                document_id: Set(document_id.clone()),
                page: Set(i32::try_from(number).unwrap_or(i32::MAX)),
                text: Set(text),
            })
            .collect();
        for batch in pages.chunks(200) {
            document_pages::Entity::insert_many(batch.to_vec())
                .exec(&txn)
                .await?;
        }
        self.vectors
            .write_document(&txn, &collection.id, &document_id, vectors)
            .await?;
        touch_collection(&txn, &collection.id, 1, upload.size).await?;
        if let Some(row) = jobs::Entity::find_by_id(job.id.clone()).one(&txn).await? {
            jobq::announce(&txn, &row).await?;
        }
        outbox::enqueue(
            &txn,
            &envelope(
                topics::INGEST_DOCUMENT_CREATED,
                &job.owner_id,
                &DocumentChanged {
                    document_id,
                    collection_id: collection.id.clone(),
                    user_id: job.owner_id.clone(),
                },
            ),
        )
        .await?;
        outbox::enqueue_all(&txn, &costs::events(calls)).await?;
        txn.commit().await?;
        calls.clear();
        Ok(Outcome::Done)
    }
}
