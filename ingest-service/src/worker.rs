//! Ingestion workers: claim a job within its owner's concurrency cap, then parse → chunk →
//! embed, and store the document, its chunks and the job's completion in one transaction —
//! so a worker that dies mid-job leaves nothing behind and the job simply runs again.

use docchat_common::bus::topics;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration as StdDuration;

use chrono::Duration;
use docchat_common::bus::{EventHandler, envelope};
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::outbox;
use docchat_common::settings::SettingsClient;
use docchat_common::time::now;
use docchat_inference::{ChatMessage, Embedder, Embedders, OpenAiChat, Transcriber};
use docchat_parsers::{AudioSegment, ChunkOptions, ParsedDocument};
use docchat_proto::events::v1::{DocumentChanged, Envelope, LlmUsage};
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::blobs::BlobStore;
use crate::costs::{self, Costs, Metered};
use crate::documents::{Segment, touch_collection};
use crate::entities::{chunks, collections, documents, jobs, uploads};
use crate::index::encode;
use crate::jobs::{self as jobq, IngestParams};
use crate::pages::encode_page_starts;
use crate::vectors::VectorStore;

/// Work-queue groups (the doorbell; the job rows are the queue).
pub const WORK_GROUP: &str = "ingest.workers";
const EMBED_BATCH: usize = 32;
/// Chunks aim below the embedder's window, with some overlap.
const CHUNK_TOKENS: usize = 200;
const CHUNK_OVERLAP: usize = 32;

#[derive(Debug, Clone, Copy)]
pub struct WorkerConfig {
    pub workers: usize,
    pub lease: StdDuration,
    /// Cap when admin-service cannot be asked (its default).
    pub fallback_cap: i64,
    /// One attempt's budget: past it the job ends as `timeout`.
    pub budget: StdDuration,
}

#[derive(Clone)]
pub struct Workers {
    pub db: DatabaseConnection,
    pub blobs: BlobStore,
    pub embedders: Arc<Embedders>,
    pub settings: SettingsClient,
    pub config: WorkerConfig,
    pub wake: Arc<Notify>,
    /// Speech to text for audio and video, when a transcription upstream is configured.
    pub transcriber: Option<Arc<Metered<Transcriber>>>,
    /// The default chat model, for document summaries and suggested questions.
    pub chat: Option<Arc<Metered<OpenAiChat>>>,
    /// The job owner's cost caps, checked before each model call.
    pub costs: Costs,
    /// Receives each document's vectors in the transaction that writes its chunks.
    pub vectors: VectorStore,
    /// The jobs running here (see [`Running`]).
    pub running: Running,
}

/// What the language model adds to a document when asked.
#[derive(Default)]
struct Extras {
    summary: Option<String>,
    questions: Option<Vec<String>>,
    /// Why a requested extra is missing (recorded on the job; the document still counts).
    notes: Vec<String>,
}

const EXTRA_SOURCE_CHARS: usize = 6000;

/// Summary and questions of a document, as its job asked; the calls made go to `calls`.
async fn extras(
    chat: Option<&Metered<OpenAiChat>>,
    costs: &Costs,
    owner: &str,
    params: &IngestParams,
    name: &str,
    pieces: &[docchat_parsers::Chunk],
    calls: &mut Vec<LlmUsage>,
) -> Extras {
    let mut out = Extras::default();
    if !params.gen_doc_summaries && !params.gen_doc_questions {
        return out;
    }
    let Some(chat) = chat else {
        out.notes
            .push("summaries and questions need a chat model, and none is configured".into());
        return out;
    };
    // One look at the owner's caps for both calls: the first one's cost reaches the
    // ledger only after this document is stored anyway.
    if let Err(refused) = costs.allow(owner).await {
        for (wanted, what) in [
            (params.gen_doc_summaries, "summary"),
            (params.gen_doc_questions, "questions"),
        ] {
            if wanted {
                out.notes
                    .push(format!("{what} not generated: {}", refused.message));
            }
        }
        return out;
    }
    let mut source = String::new();
    for p in pieces {
        if source.len() + p.text.len() > EXTRA_SOURCE_CHARS {
            break;
        }
        source.push_str(&p.text);
        source.push_str("\n\n");
    }
    if params.gen_doc_summaries {
        let messages = [
            ChatMessage::system("Summarize documents in one short paragraph of plain text."),
            ChatMessage::user(format!(
                "Document: {name}\n\n{source}\nSummarize this document."
            )),
        ];
        match chat.model.complete(&messages, 300, 0.0).await {
            Ok(c) => {
                calls.push(chat.usage(owner, "summary", c.prompt_tokens, c.completion_tokens));
                if c.text.is_empty() {
                    out.notes.push("the summary came back empty".into());
                } else {
                    out.summary = Some(c.text);
                }
            }
            Err(e) => out.notes.push(format!("summary not generated: {e}")),
        }
    }
    if params.gen_doc_questions {
        let messages = [
            ChatMessage::system(
                "You suggest questions a reader could ask about a document: three questions, one per line, nothing else.",
            ),
            ChatMessage::user(format!("Document: {name}\n\n{source}")),
        ];
        match chat.model.complete(&messages, 200, 0.0).await {
            Ok(c) => {
                calls.push(chat.usage(owner, "questions", c.prompt_tokens, c.completion_tokens));
                let questions: Vec<String> = c
                    .text
                    .lines()
                    .map(|l| {
                        l.trim()
                            .trim_start_matches(|ch: char| {
                                ch.is_ascii_digit() || matches!(ch, '.' | ')' | '-' | '*')
                            })
                            .trim()
                            .to_owned()
                    })
                    .filter(|l| !l.is_empty())
                    .take(10)
                    .collect();
                if questions.is_empty() {
                    out.notes
                        .push("the suggested questions came back empty".into());
                } else {
                    out.questions = Some(questions);
                }
            }
            Err(e) => out.notes.push(format!("questions not generated: {e}")),
        }
    }
    out
}

/// Wakes idle workers when a `ingest.work.*` doorbell rings.
pub struct Doorbell(pub Arc<Notify>);

#[async_trait::async_trait]
impl EventHandler for Doorbell {
    async fn handle(&self, _event: &Envelope) -> anyhow::Result<()> {
        self.0.notify_waiters();
        Ok(())
    }
}

/// Why a job's work was dropped before it ended on its own.
enum Stopped {
    /// The row is no longer this attempt's: canceled, or the lease went elsewhere.
    Lost,
    /// This replica is shutting down.
    Shutdown,
    /// It ran past [`WorkerConfig::budget`].
    Budget,
}

/// The jobs this replica's workers run, so a cancel arriving here stops its worker at once
/// (other replicas' workers notice at their next heartbeat, when the row is no longer theirs).
#[derive(Clone, Default)]
pub struct Running(Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>);

/// Removes its job from [`Running`] when the worker is done with it.
pub struct Registered {
    running: Running,
    job_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.running.lock().remove(&self.job_id);
    }
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn register(&self, job_id: &str, stop: &CancellationToken) -> Registered {
        self.lock().insert(job_id.to_owned(), stop.clone());
        Registered {
            running: self.clone(),
            job_id: job_id.to_owned(),
        }
    }

    /// Stops the worker running `job_id` here, if one does.
    pub fn stop(&self, job_id: &str) {
        if let Some(token) = self.lock().get(job_id) {
            token.cancel();
        }
    }
}

enum Outcome {
    Done,
    /// The job is no longer ours (lease lost or canceled): leave it alone.
    Lost,
}

impl Workers {
    fn lease(&self) -> Duration {
        Duration::milliseconds(i64::try_from(self.config.lease.as_millis()).unwrap_or(60_000))
    }

    async fn cap_for(&self, owner: &str) -> Option<i64> {
        match self.settings.resolve_user("ingest-worker", owner).await {
            Ok(resolved) => resolved.limit("crawl_max_concurrent_per_user"),
            Err(e) => {
                tracing::warn!(error = %e.message, "cannot resolve settings, using the default crawl cap");
                Some(self.config.fallback_cap)
            }
        }
    }

    /// The next job this worker may run, claimed.
    pub async fn claim(&self) -> ApiResult<Option<jobs::Model>> {
        for job in jobq::candidates(&self.db, 64).await? {
            let cap = self.cap_for(&job.owner_id).await;
            if jobq::try_claim(&self.db, &job, cap, self.lease()).await? {
                return Ok(jobs::Entity::find_by_id(job.id).one(&self.db).await?);
            }
        }
        Ok(None)
    }

    /// Runs worker loops until `token` is cancelled.
    pub async fn run(self, id: usize, token: CancellationToken) {
        tracing::info!(worker = id, "ingest worker started");
        loop {
            if token.is_cancelled() {
                break;
            }
            match self.claim().await {
                Ok(Some(job)) => self.process(job, &token).await,
                Ok(None) => {
                    tokio::select! {
                        () = token.cancelled() => break,
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(StdDuration::from_millis(500)) => {}
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "claiming a job failed");
                    tokio::select! {
                        () = token.cancelled() => break,
                        () = tokio::time::sleep(StdDuration::from_secs(1)) => {}
                    }
                }
            }
        }
    }

    /// Puts jobs whose worker died back in the queue: one loop per replica, twice per
    /// lease (a lapsed lease cannot be noticed sooner than that anyway).
    pub async fn recover(self, token: CancellationToken) {
        loop {
            match jobq::recover_stale(&self.db).await {
                Ok(n) if n > 0 => self.wake.notify_waiters(),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.message, "recovering stale jobs failed"),
            }
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(self.config.lease / 2) => {}
            }
        }
    }

    async fn process(&self, job: jobs::Model, token: &CancellationToken) {
        let progress = Arc::new(AtomicU64::new(0f64.to_bits()));
        let lost = CancellationToken::new();
        #[expect(
            clippy::disallowed_methods,
            reason = "the job's heartbeat, aborted when the job ends"
        )]
        let heartbeat = {
            let db = self.db.clone();
            let id = job.id.clone();
            let lease = self.lease();
            let every = self.config.lease / 3;
            let progress = progress.clone();
            let lost = lost.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let p = f64::from_bits(progress.load(Ordering::Relaxed));
                    match jobq::renew(&db, &id, lease, p).await {
                        Ok(true) => {}
                        Ok(false) => {
                            lost.cancel();
                            return;
                        }
                        Err(e) => tracing::warn!(error = %e.message, "renewing a job lease failed"),
                    }
                }
            })
        };
        // Cancelled on this replica: stop at once rather than at the next heartbeat.
        let _registered = self.running.register(&job.id, &lost);
        // The model calls made for the job: booked with the document when it is stored,
        // else with the failure, else on their own.
        let mut calls = Vec::new();
        let result = tokio::select! {
            r = self.ingest(&job, &progress, &mut calls) => Ok(r),
            () = lost.cancelled() => Err(Stopped::Lost),
            () = token.cancelled() => Err(Stopped::Shutdown),
            () = tokio::time::sleep(self.config.budget) => Err(Stopped::Budget),
        };
        heartbeat.abort();
        let usage = costs::events(&calls);
        match result {
            Ok(Ok(Outcome::Done)) => tracing::info!(job_id = %job.id, "ingestion completed"),
            Ok(Ok(Outcome::Lost)) => {
                tracing::warn!(job_id = %job.id, "the job was no longer ours at commit (canceled or lease lost); nothing stored");
            }
            Err(Stopped::Lost) => {
                tracing::info!(job_id = %job.id, "the job is no longer ours (canceled, or its lease went to another worker); stopped");
            }
            Err(Stopped::Shutdown) => {
                // Shutting down: hand the job back now rather than after the lease lapses.
                if let Err(e) = requeue(&self.db, &job).await {
                    tracing::warn!(job_id = %job.id, error = %e.message, "could not requeue the job");
                }
            }
            Err(Stopped::Budget) => {
                tracing::info!(job_id = %job.id, "ingestion ran past its budget");
                match jobq::time_out(&self.db, &job.id, job.attempts, self.config.budget, &usage)
                    .await
                {
                    Ok(()) => return,
                    Err(e2) => {
                        tracing::error!(job_id = %job.id, error = %e2.message, "could not record the timeout");
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::info!(job_id = %job.id, reason = %e.message, "ingestion failed");
                match jobq::fail(&self.db, &job.id, &e.message, &usage).await {
                    Ok(()) => return,
                    Err(e2) => {
                        tracing::error!(job_id = %job.id, error = %e2.message, "could not record the failure");
                    }
                }
            }
        }
        if !usage.is_empty()
            && let Err(e) = outbox::enqueue_all(&self.db, &usage).await
        {
            tracing::error!(job_id = %job.id, error = %e, "could not book the job's model calls");
        }
    }

    async fn ingest(
        &self,
        job: &jobs::Model,
        progress: &AtomicU64,
        calls: &mut Vec<LlmUsage>,
    ) -> ApiResult<Outcome> {
        let set = |p: f64| progress.store(p.to_bits(), Ordering::Relaxed);
        let params: IngestParams = serde_json::from_str(&job.params).unwrap_or_default();
        let upload_id = job.upload_id.clone().unwrap_or_default();
        let upload = uploads::Entity::find_by_id(upload_id.clone())
            .one(&self.db)
            .await?
            .ok_or_else(|| ApiError::bad_request("the upload no longer exists"))?;
        let collection = collections::Entity::find_by_id(job.collection_id.clone())
            .one(&self.db)
            .await?
            .ok_or_else(|| ApiError::bad_request("the collection was deleted"))?;
        let embedder = self
            .embedders
            .get(&collection.embedding_model)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "embedding model {} is not available",
                    collection.embedding_model
                ))
            })?;
        let bytes = self.blobs.read(&upload.id).await?;

        let parsed = if docchat_parsers::is_media(&upload.filename) {
            self.transcribe(&job.owner_id, &upload.filename, bytes, calls)
                .await?
        } else {
            parse(&upload.filename, bytes).await?
        };
        set(0.15);
        let pieces = {
            let embedder = embedder.clone();
            let options = ChunkOptions {
                max_tokens: CHUNK_TOKENS.min(embedder.max_input_tokens()),
                overlap_tokens: CHUNK_OVERLAP,
            };
            let doc = parsed.clone();
            tokio::task::spawn_blocking(move || {
                docchat_parsers::chunk(&doc, &options, &|t: &str| embedder.count_tokens(t))
            })
            .await
            .map_err(|e| ApiError::internal("chunking", e))?
        };
        if pieces.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{} contains no text to index",
                upload.filename
            )));
        }
        let vectors = embed_all(embedder.as_ref(), &pieces, |done| {
            set(0.15 + 0.8 * done as f64 / pieces.len() as f64);
        })
        .await?;

        let extras = extras(
            self.chat.as_deref(),
            &self.costs,
            &job.owner_id,
            &params,
            &upload.filename,
            &pieces,
            calls,
        )
        .await;

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
        let notes: Vec<String> = extras.notes.iter().map(|n| jobq::error_line(n)).collect();
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
            kind: Set(parsed.kind.as_str().to_owned()),
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
            created_at: Set(at),
            updated_at: Set(at),
        }
        .insert(&txn)
        .await?;
        let rows: Vec<chunks::ActiveModel> = pieces
            .iter()
            .zip(&vectors)
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
        self.vectors
            .write_document(&txn, &collection.id, &document_id, &vectors)
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
        set(1.0);
        Ok(Outcome::Done)
    }

    /// Audio and video go through the transcription upstream (within the owner's cost
    /// caps), and fail clearly without one.
    async fn transcribe(
        &self,
        owner: &str,
        filename: &str,
        bytes: Vec<u8>,
        calls: &mut Vec<LlmUsage>,
    ) -> ApiResult<ParsedDocument> {
        let Some(transcriber) = self.transcriber.as_deref() else {
            return Err(ApiError::bad_request(format!(
                "{filename} is audio or video: transcription needs an OpenAI-compatible /v1/audio/transcriptions upstream, and none is configured"
            )));
        };
        self.costs.allow(owner).await.map_err(|refused| {
            ApiError::bad_request(format!("{filename} not transcribed: {}", refused.message))
        })?;
        let speech = transcriber
            .model
            .transcribe(filename, bytes)
            .await
            .map_err(|e| ApiError::bad_request(format!("{filename}: {e}")))?;
        calls.push(transcriber.usage(
            owner,
            "transcription",
            speech.prompt_tokens,
            speech.completion_tokens,
        ));
        let segments = speech
            .segments
            .into_iter()
            .map(|s| AudioSegment {
                start: s.start,
                end: s.end,
                speaker: s
                    .speaker
                    .as_deref()
                    .map(docchat_parsers::display_name)
                    .unwrap_or_default(),
                original_speaker: s.speaker,
                text: s.text,
            })
            .collect();
        let doc = docchat_parsers::segments_to_document(segments);
        if doc.segments.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{filename}: no speech was recognized"
            )));
        }
        Ok(doc)
    }
}

/// Parses a file that is not audio or video, on a blocking thread.
async fn parse(filename: &str, bytes: Vec<u8>) -> ApiResult<ParsedDocument> {
    let name = filename.to_owned();
    tokio::task::spawn_blocking(move || docchat_parsers::parse(&name, &bytes))
        .await
        .map_err(|e| ApiError::internal("parsing", e))?
        .map_err(|e| ApiError::bad_request(format!("{filename}: {e}")))
}

async fn embed_all(
    embedder: &dyn Embedder,
    pieces: &[docchat_parsers::Chunk],
    mut on_progress: impl FnMut(usize),
) -> ApiResult<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(pieces.len());
    for batch in pieces.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch.iter().map(|c| c.text.clone()).collect();
        let vectors = embedder
            .embed(&texts)
            .await
            .map_err(|e| ApiError::internal("embedding", e))?;
        if vectors.len() != texts.len() {
            return Err(ApiError::internal(
                "embedding",
                "the embedder returned a different number of vectors",
            ));
        }
        out.extend(vectors);
        on_progress(out.len());
    }
    Ok(out)
}

/// Hands a running job back to the queue (graceful shutdown).
async fn requeue(db: &DatabaseConnection, job: &jobs::Model) -> ApiResult<()> {
    let txn = docchat_common::db::begin(db).await?;
    let updated = jobs::Entity::update_many()
        .col_expr(
            jobs::Column::Status,
            sea_orm::sea_query::Expr::value("queued"),
        )
        .col_expr(
            jobs::Column::Progress,
            sea_orm::sea_query::Expr::value(0.0f64),
        )
        .col_expr(
            jobs::Column::LeaseUntil,
            sea_orm::sea_query::Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .col_expr(
            jobs::Column::Attempts,
            sea_orm::sea_query::Expr::col(jobs::Column::Attempts).sub(1),
        )
        .col_expr(
            jobs::Column::UpdatedAt,
            sea_orm::sea_query::Expr::value(now()),
        )
        .filter(jobs::Column::Id.eq(job.id.clone()))
        .filter(jobs::Column::Status.eq("running"))
        .filter(jobs::Column::Attempts.eq(job.attempts))
        .exec(&txn)
        .await?;
    if updated.rows_affected == 1
        && let Some(row) = jobs::Entity::find_by_id(job.id.clone()).one(&txn).await?
    {
        jobq::announce(&txn, &row).await?;
    }
    txn.commit().await?;
    Ok(())
}
