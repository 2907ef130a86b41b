//! Ingestion workers: claim a job within its owner's concurrency cap, then parse → chunk →
//! embed, and store the document, its chunks and the job's completion in one transaction —
//! so a worker that dies mid-job leaves nothing behind and the job simply runs again.

mod extras;
mod leases;
mod pipeline;
mod reading;
mod running;
mod store;

pub use running::Running;

use std::sync::Arc;
use std::time::Duration as StdDuration;

use docchat_common::bus::EventHandler;
use docchat_common::settings::SettingsClient;
use docchat_inference::{Embedders, OpenAiChat, Transcriber};
use docchat_proto::events::v1::Envelope;
use sea_orm::DatabaseConnection;
use tokio::sync::Notify;

use crate::blobs::BlobStore;
use crate::costs::{Costs, Metered};
use crate::vectors::VectorStore;

/// Work-queue groups (the doorbell; the job rows are the queue).
pub const WORK_GROUP: &str = "ingest.workers";

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
    /// Text recognition of scanned pages and images.
    pub ocr: Arc<crate::ocr::Ocr>,
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
