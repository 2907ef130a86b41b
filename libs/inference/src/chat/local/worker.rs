//! The worker thread behind [`LocalChat`]: one per model, loading it at the first request
//! and running requests in order, tokens streamed back through a channel.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::model::{LocalModel, StopReason};
use super::sampling::GenParams;
use super::tokenizer::take_utf8;
use super::{LocalError, LocalOptions};
use crate::chat::{ChatError, ChatMessage, ChatStream, Completion, EventSource, StreamEvent};
use crate::registry::ModelEntry;

/// One request for the worker.
struct Job {
    messages: Vec<ChatMessage>,
    max_tokens: usize,
    temperature: f32,
    tx: tokio::sync::mpsc::Sender<StreamItem>,
}

struct Shared {
    name: String,
    path: PathBuf,
    options: LocalOptions,
    /// The worker's queue, started by the first request.
    jobs: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
    requests: std::sync::atomic::AtomicU64,
}

/// A local GGUF chat model behind the same calls as [`OpenAiChat`](crate::OpenAiChat).
pub struct LocalChat {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalChat")
            .field("name", &self.shared.name)
            .field("path", &self.shared.path)
            .finish()
    }
}

/// Tokens buffered between the worker and the caller.
const CHANNEL: usize = 64;

impl LocalChat {
    /// A local model for `path`; nothing is loaded until the first request.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, options: LocalOptions) -> Self {
        LocalChat {
            shared: Arc::new(Shared {
                name: name.into(),
                path: path.into(),
                options,
                jobs: Mutex::new(None),
                requests: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The local model of a registry entry found by [`find_local_models`](super::find_local_models).
    pub fn from_entry(entry: &ModelEntry, options: LocalOptions) -> Result<Self, ChatError> {
        let path = entry
            .local_path
            .as_ref()
            .ok_or_else(|| ChatError::Local(format!("model {} has no local file", entry.name)))?;
        Ok(LocalChat::new(entry.name.clone(), path.clone(), options))
    }

    /// The registry name of the model.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues a generation; tokens arrive on the returned stream.
    pub async fn stream(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<ChatStream, ChatError> {
        let (tx, rx) = tokio::sync::mpsc::channel(CHANNEL);
        let job = Job {
            messages: messages.to_vec(),
            max_tokens: max_tokens as usize,
            temperature,
            tx,
        };
        let mut jobs = self
            .shared
            .jobs
            .lock()
            .map_err(|_| ChatError::Local("the model worker failed".into()))?;
        let job = match jobs.as_ref() {
            Some(q) => match q.send(job) {
                Ok(()) => None,
                Err(std::sync::mpsc::SendError(job)) => Some(job),
            },
            None => Some(job),
        };
        if let Some(job) = job {
            // First request, or the worker is gone: start one.
            let (q, worker_rx) = std::sync::mpsc::channel();
            let shared = self.shared.clone();
            std::thread::Builder::new()
                .name(format!("docchat-llm-{}", shared.name))
                .spawn(move || worker(&shared, &worker_rx))
                .map_err(|e| ChatError::Local(format!("cannot start the model thread: {e}")))?;
            q.send(job)
                .map_err(|_| ChatError::Local("the model worker failed".into()))?;
            *jobs = Some(q);
        }
        Ok(ChatStream::new(Box::new(ChannelStream {
            rx,
            usage: (0, 0),
            length: false,
            done: false,
        })))
    }

    /// A whole answer (trimmed, as [`OpenAiChat::complete`](crate::OpenAiChat::complete)).
    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
    ) -> Result<Completion, ChatError> {
        let mut stream = self.stream(messages, max_tokens, temperature).await?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::Delta(d) => text.push_str(&d),
            }
        }
        let (prompt_tokens, completion_tokens) = stream.usage();
        Ok(Completion {
            text: text.trim().to_owned(),
            prompt_tokens,
            completion_tokens,
            finish_reason: stream.finish_reason().to_owned(),
        })
    }
}

/// What the worker sends.
enum StreamItem {
    Delta(String),
    Done {
        prompt_tokens: u64,
        completion_tokens: u64,
        /// It stopped at `max_tokens` or the end of the context.
        length: bool,
    },
    Failed(ChatError),
}

/// The caller's end of a generation.
struct ChannelStream {
    rx: tokio::sync::mpsc::Receiver<StreamItem>,
    usage: (u64, u64),
    length: bool,
    done: bool,
}

#[async_trait::async_trait]
impl EventSource for ChannelStream {
    async fn next(&mut self) -> Option<Result<StreamEvent, ChatError>> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            Some(StreamItem::Delta(text)) => Some(Ok(StreamEvent::Delta(text))),
            Some(StreamItem::Done {
                prompt_tokens,
                completion_tokens,
                length,
            }) => {
                self.usage = (prompt_tokens, completion_tokens);
                self.length = length;
                self.done = true;
                None
            }
            Some(StreamItem::Failed(e)) => {
                self.done = true;
                Some(Err(e))
            }
            None => {
                self.done = true;
                Some(Err(ChatError::Local(
                    "the model stopped before the end of its answer".into(),
                )))
            }
        }
    }

    fn usage(&self) -> (u64, u64) {
        self.usage
    }

    fn finish_reason(&self) -> &str {
        if self.length { "length" } else { "stop" }
    }
}

/// The worker thread: loads the model at the first job and runs jobs in order until every
/// [`LocalChat`] handle is gone.
fn worker(shared: &Shared, jobs: &std::sync::mpsc::Receiver<Job>) {
    let mut model: Option<LocalModel> = None;
    while let Ok(job) = jobs.recv() {
        if job.tx.is_closed() {
            continue;
        }
        if model.is_none() {
            match LocalModel::load(&shared.path, &shared.options) {
                Ok(m) => model = Some(m),
                Err(e) => {
                    tracing::error!(model = %shared.name, error = %e, "cannot load the local model");
                    let _ = job.tx.blocking_send(StreamItem::Failed(e.into()));
                    continue;
                }
            }
        }
        if let Some(model) = &model {
            let n = shared
                .requests
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            run_job(model, job, shared.options.seed, n);
        }
    }
}

fn run_job(model: &LocalModel, job: Job, seed: Option<u64>, n: u64) {
    let prompt = match model.chat_prompt(&job.messages) {
        Ok(p) => p,
        Err(e) => {
            let _ = job.tx.blocking_send(StreamItem::Failed(e.into()));
            return;
        }
    };
    let room = model.context_length().saturating_sub(prompt.len());
    if room == 0 {
        let e = LocalError::ContextExceeded {
            tokens: prompt.len(),
            context: model.context_length(),
        };
        let _ = job.tx.blocking_send(StreamItem::Failed(e.into()));
        return;
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let params = GenParams::chat(
        job.max_tokens.min(room),
        job.temperature,
        seed.wrapping_add(n),
    );
    let tx = job.tx;
    let mut pending = Vec::new();
    let mut started = false;
    let tokenizer = model.tokenizer();
    let result = model.generate(&prompt, &params, &|| tx.is_closed(), &mut |id| {
        tokenizer.token_bytes(id, &mut pending);
        let mut text = take_utf8(&mut pending);
        if !started {
            // The answer starts at its first visible character.
            text = text.trim_start().to_owned();
            started = !text.is_empty();
        }
        text.is_empty() || tx.blocking_send(StreamItem::Delta(text)).is_ok()
    });
    match result {
        Ok(stats) => {
            if !pending.is_empty() {
                let text = String::from_utf8_lossy(&pending).into_owned();
                let _ = tx.blocking_send(StreamItem::Delta(text));
            }
            tracing::debug!(
                prompt_tokens = stats.prompt_tokens,
                completion_tokens = stats.completion_tokens,
                prefill_ms = stats.prefill.as_millis() as u64,
                decode_ms = stats.decode.as_millis() as u64,
                stop = ?stats.stop,
                "local generation done"
            );
            let _ = tx.blocking_send(StreamItem::Done {
                prompt_tokens: stats.prompt_tokens as u64,
                completion_tokens: stats.completion_tokens as u64,
                length: stats.stop == StopReason::Length,
            });
        }
        Err(e) => {
            tracing::warn!(error = %e, "local generation failed");
            let _ = tx.blocking_send(StreamItem::Failed(e.into()));
        }
    }
}
