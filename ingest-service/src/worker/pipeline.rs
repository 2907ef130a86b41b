//! The parse → chunk → embed pipeline a job's upload goes through before it is stored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::Embedder;
use docchat_parsers::{AudioSegment, ChunkOptions, ParsedDocument};
use docchat_proto::events::v1::LlmUsage;
use sea_orm::EntityTrait;

use super::Workers;
use super::extras::extras;
use super::store::{Ingested, Outcome};
use crate::entities::{collections, jobs, uploads};
use crate::jobs::IngestParams;
use crate::metrics;

const EMBED_BATCH: usize = 32;
/// Chunks aim below the embedder's window, with some overlap.
const CHUNK_TOKENS: usize = 200;
const CHUNK_OVERLAP: usize = 32;
/// The share of a job's progress that reading takes when pages are recognized (a page of
/// recognition costs seconds, against milliseconds for chunking and embedding it).
const READ_SHARE: f64 = 0.6;

impl Workers {
    /// Parses, chunks and embeds a job's upload (with the extras its job asks for), then
    /// stores it ([`Workers::store`]); `progress` follows along.
    pub(super) async fn ingest(
        &self,
        job: &jobs::Model,
        progress: &AtomicU64,
        calls: &mut Vec<LlmUsage>,
    ) -> ApiResult<Outcome> {
        let set = |p: f64| progress.store(p.to_bits(), Ordering::Relaxed);
        // The job's row was written from IngestParams: one that does not read back is a
        // failed job, not one run with other settings than asked.
        let params: IngestParams = serde_json::from_str(&job.params)
            .map_err(|e| ApiError::internal("reading the job's parameters", e))?;
        let upload_id = job
            .upload_id
            .clone()
            .ok_or_else(|| ApiError::bad_request("the job names no upload"))?;
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
        let at = Instant::now();
        let bytes = self.blobs.read(&upload.id).await?;
        metrics::stage("read", at.elapsed());

        let at = Instant::now();
        let (parsed, reading) = if docchat_parsers::is_media(&upload.filename) {
            let parsed = self
                .transcribe(&job.owner_id, &upload.filename, bytes, calls)
                .await?;
            metrics::stage("transcribe", at.elapsed());
            (parsed, None)
        } else if docchat_parsers::is_image(&upload.filename, &bytes) {
            let (parsed, reading) = self
                .read_image(&job.owner_id, &params, &upload.filename, &bytes)
                .await?;
            metrics::stage("ocr", at.elapsed());
            (parsed, Some(reading))
        } else {
            let (parsed, bytes) = parse(&upload.filename, bytes).await;
            let parsed = parsed?;
            metrics::stage("parse", at.elapsed());
            // Scanned pages are read page by page: the job's progress moves with them,
            // up to READ_SHARE.
            let at = Instant::now();
            let read = self
                .read_scans(
                    &job.owner_id,
                    &params,
                    &upload.filename,
                    &bytes,
                    parsed,
                    |share| set(0.02 + (READ_SHARE - 0.02) * share),
                )
                .await?;
            if read.1.is_some() {
                metrics::stage("ocr", at.elapsed());
            }
            read
        };
        // The rest of the job's progress: chunking, embedding, storing.
        let base = if reading.is_some() { READ_SHARE } else { 0.15 };
        set(base);
        let at = Instant::now();
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
        metrics::stage("chunk", at.elapsed());
        if pieces.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{} contains no text to index",
                upload.filename
            )));
        }
        let at = Instant::now();
        let vectors = embed_all(embedder.as_ref(), &pieces, |done| {
            set(base + (0.95 - base) * done as f64 / pieces.len() as f64);
        })
        .await?;
        metrics::stage("embed", at.elapsed());

        let at = Instant::now();
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
        metrics::stage("extras", at.elapsed());
        let doc = Ingested {
            upload,
            collection,
            parsed,
            reading,
            pieces,
            vectors,
            extras,
        };
        let at = Instant::now();
        let outcome = self.store(job, &doc, calls).await?;
        metrics::stage("index", at.elapsed());
        if matches!(outcome, Outcome::Done) {
            metrics::stored(doc.parsed.pages.len(), doc.upload.size);
            set(1.0);
        }
        Ok(outcome)
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

/// Parses a file that is not audio, video or an image, on a blocking thread; the bytes
/// come back (a PDF's scanned pages are rendered from them).
async fn parse(filename: &str, bytes: Vec<u8>) -> (ApiResult<ParsedDocument>, Vec<u8>) {
    let name = filename.to_owned();
    match tokio::task::spawn_blocking(move || (docchat_parsers::parse(&name, &bytes), bytes)).await
    {
        Ok((parsed, bytes)) => (
            parsed.map_err(|e| ApiError::bad_request(format!("{filename}: {e}"))),
            bytes,
        ),
        Err(e) => (Err(ApiError::internal("parsing", e)), Vec::new()),
    }
}

async fn embed_all(
    embedder: &dyn Embedder,
    pieces: &[docchat_parsers::Chunk],
    mut on_progress: impl FnMut(usize),
) -> ApiResult<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(pieces.len());
    for batch in pieces.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch.iter().map(|c| c.text.clone()).collect();
        let at = Instant::now();
        let vectors = embedder
            .embed(&texts)
            .await
            .map_err(|e| ApiError::internal("embedding", e))?;
        metrics::embedded(embedder.name(), texts.len(), at.elapsed());
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
