//! The local sentence embedder: all-MiniLM-L6-v2 (a 6-layer BERT) run in-process.
//!
//! The pipeline is sentence-transformers' for this model (`modules.json`: Transformer →
//! mean Pooling → Normalize): WordPiece tokens with `[CLS]`/`[SEP]`, truncated to
//! `max_seq_length` (256), the BERT encoder, the mean of the last hidden states over the
//! sequence's tokens, and L2 normalization.
//!
//! Work runs on a dedicated rayon pool (never on the async runtime): texts are tokenized in
//! parallel, sorted by token count and cut into batches of similar lengths, and each batch
//! runs packed, without padding (see [`super::bert`]). One call runs on the pool at a time;
//! callers queue in order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde::Deserialize;
use tokenizers::Tokenizer;
use tokio::sync::{Semaphore, oneshot};

use super::bert::{Bert, Precision};
use super::{EmbedError, Embedder, l2_normalize};

/// The name the local MiniLM is known by, and its directory under the models dir.
pub const MINILM_NAME: &str = "all-MiniLM-L6-v2";

/// Sequences per forward pass; sentence-transformers' default batch size.
const DEFAULT_BATCH_SIZE: usize = 32;

/// The fields of `sentence_bert_config.json` we use.
#[derive(Debug, Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

/// The fields of `1_Pooling/config.json` we check.
#[derive(Debug, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

struct Inner {
    name: String,
    tokenizer: Tokenizer,
    model: Bert,
    max_tokens: usize,
    cls: u32,
    sep: u32,
    batch_size: usize,
    threads: usize,
}

/// all-MiniLM-L6-v2 (or another BERT sentence-transformers model with mean pooling) run
/// in-process on the CPU.
pub struct MiniLmEmbedder {
    inner: Arc<Inner>,
    pool: Arc<rayon::ThreadPool>,
    /// One embedding job on the pool at a time: interleaved jobs would only thrash caches.
    gate: Arc<Semaphore>,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("name", &self.inner.name)
            .field("max_tokens", &self.inner.max_tokens)
            .field("threads", &self.inner.threads)
            .field("linear", &self.inner.model.linear_kind())
            .finish()
    }
}

fn read(dir: &Path, file: &str) -> Result<Vec<u8>, EmbedError> {
    let path = dir.join(file);
    std::fs::read(&path).map_err(|source| EmbedError::Io { path, source })
}

fn read_json<T: for<'de> Deserialize<'de>>(dir: &Path, file: &str) -> Result<T, EmbedError> {
    let bytes = read(dir, file)?;
    serde_json::from_slice(&bytes).map_err(|e| EmbedError::InvalidModel {
        path: dir.join(file),
        message: e.to_string(),
    })
}

impl MiniLmEmbedder {
    /// Loads the model from a directory laid out as sentence-transformers saves it
    /// (`config.json`, `tokenizer.json`, `model.safetensors`, `sentence_bert_config.json`,
    /// `1_Pooling/config.json`; `scripts/fetch-models.sh` puts them there). `threads` sizes
    /// the embedder's own thread pool (default: the CPUs available to the process). The
    /// linear layers run in [`Precision::Auto`].
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<Self, EmbedError> {
        Self::load_with_precision(dir, threads, Precision::Auto)
    }

    /// [`MiniLmEmbedder::load`] with the arithmetic of the linear layers chosen:
    /// [`Precision::F32`] forces the f32 path on CPUs that have a faster one.
    pub fn load_with_precision(
        dir: &Path,
        threads: Option<usize>,
        precision: Precision,
    ) -> Result<Self, EmbedError> {
        let name = MINILM_NAME.to_owned();
        let invalid = |file: &str, message: String| EmbedError::InvalidModel {
            path: dir.join(file),
            message,
        };

        let config = String::from_utf8(read(dir, "config.json")?)
            .map_err(|e| invalid("config.json", e.to_string()))?;
        let weights = read(dir, "model.safetensors")?;
        let model = Bert::load(&config, &weights, precision)
            .map_err(|m| invalid("model.safetensors", m))?;
        drop(weights);

        let st: Option<SentenceBertConfig> = if dir.join("sentence_bert_config.json").exists() {
            Some(read_json(dir, "sentence_bert_config.json")?)
        } else {
            None
        };
        let max_tokens = st
            .map(|c| c.max_seq_length)
            .unwrap_or(model.max_positions())
            .min(model.max_positions());
        if max_tokens < 3 {
            return Err(invalid(
                "sentence_bert_config.json",
                format!("max_seq_length {max_tokens} leaves no room for text"),
            ));
        }
        if dir.join("1_Pooling/config.json").exists() {
            let pooling: PoolingConfig = read_json(dir, "1_Pooling/config.json")?;
            if !pooling.pooling_mode_mean_tokens
                || pooling.pooling_mode_cls_token
                || pooling.pooling_mode_max_tokens
                || pooling.pooling_mode_mean_sqrt_len_tokens
            {
                return Err(invalid(
                    "1_Pooling/config.json",
                    "only mean pooling is supported".into(),
                ));
            }
        }

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;
        // tokenizer.json ships with truncation at 128 and fixed padding; we truncate to
        // max_seq_length ourselves and pack without padding.
        tokenizer
            .with_truncation(None)
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;
        tokenizer.with_padding(None);
        let special = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| invalid("tokenizer.json", format!("no {token} token")))
        };
        let cls = special("[CLS]")?;
        let sep = special("[SEP]")?;

        let threads = threads
            .filter(|&t| t > 0)
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("docchat-embed-{i}"))
            .build()
            .map_err(|e| {
                EmbedError::Internal(format!("cannot start the embedding threads: {e}"))
            })?;
        tracing::info!(
            model = %name,
            dir = %dir.display(),
            threads,
            max_tokens,
            dimension = model.hidden_size(),
            linear = model.linear_kind(),
            "local embedder loaded"
        );
        Ok(MiniLmEmbedder {
            inner: Arc::new(Inner {
                name,
                tokenizer,
                model,
                max_tokens,
                cls,
                sep,
                batch_size: DEFAULT_BATCH_SIZE,
                threads,
            }),
            pool: Arc::new(pool),
            gate: Arc::new(Semaphore::new(1)),
        })
    }

    /// Renames the embedder (default `all-MiniLM-L6-v2`), for another model of the same kind.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.name = name.into();
        }
        self
    }

    /// Sets how many sequences run through the model together (default 32).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.batch_size = batch_size.max(1);
        }
        self
    }

    /// The arithmetic of the model's linear layers: `"int8-amx"` (AMX tiles), `"int8"`
    /// (AVX-512 VNNI), `"int8-avx2"` or `"f32"`.
    pub fn linear_arithmetic(&self) -> &'static str {
        self.inner.model.linear_kind()
    }

    /// The size of the embedder's thread pool.
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Where [`Embedders::load`](super::Embedders::load) looks for the local model:
    /// `<models_dir>/all-MiniLM-L6-v2`.
    pub fn default_dir(models_dir: &Path) -> PathBuf {
        models_dir.join(MINILM_NAME)
    }

    /// Embeds on the calling thread's pool; used by `embed` inside the embedder's pool.
    /// `cancelled` is polled between batches.
    fn embed_blocking(
        inner: &Inner,
        texts: &[String],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let content_max = inner.max_tokens - 2;
        let ids: Vec<Vec<u32>> = texts
            .par_iter()
            .map(|t| {
                let enc = inner
                    .tokenizer
                    .encode_fast(t.as_str(), false)
                    .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
                let content = enc.get_ids();
                let content = &content[..content.len().min(content_max)];
                let mut ids = Vec::with_capacity(content.len() + 2);
                ids.push(inner.cls);
                ids.extend_from_slice(content);
                ids.push(inner.sep);
                Ok(ids)
            })
            .collect::<Result<_, EmbedError>>()?;

        // Batches of similar lengths: the attention cost of a batch follows its lengths.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut out = vec![Vec::new(); ids.len()];
        for batch in order.chunks(inner.batch_size) {
            if cancelled() {
                return Err(EmbedError::Cancelled);
            }
            let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            let pooled = inner.model.mean_pooled(&seqs, inner.threads)?;
            for (&i, mut v) in batch.iter().zip(pooled) {
                l2_normalize(&mut v);
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn dimension(&self) -> usize {
        self.inner.model.hidden_size()
    }

    fn max_tokens(&self) -> usize {
        self.inner.max_tokens
    }

    fn max_input_tokens(&self) -> usize {
        // [CLS] and [SEP] take two of the model's positions.
        self.inner.max_tokens - 2
    }

    /// sentence-transformers' all-MiniLM models were trained on English text; another model
    /// read the same way says nothing.
    fn languages(&self) -> &'static [&'static str] {
        if self.inner.name.starts_with("all-MiniLM") {
            &["en"]
        } else {
            &[]
        }
    }

    fn count_tokens(&self, text: &str) -> usize {
        match self.inner.tokenizer.encode_fast(text, false) {
            Ok(enc) => enc.len(),
            Err(error) => {
                tracing::warn!(%error, "tokenizer failed; estimating the token count");
                text.len().div_ceil(3)
            }
        }
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let permit = self
            .gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| EmbedError::Internal("the embedder is shut down".into()))?;
        let (tx, rx) = oneshot::channel();
        let inner = self.inner.clone();
        let texts = texts.to_vec();
        self.pool.spawn(move || {
            // The permit lives as long as the job, even when the caller stops waiting.
            let _permit = permit;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                MiniLmEmbedder::embed_blocking(&inner, &texts, &|| tx.is_closed())
            }))
            .unwrap_or_else(|_| Err(EmbedError::Internal("the embedding job panicked".into())));
            let _ = tx.send(result);
        });
        rx.await
            .map_err(|_| EmbedError::Internal("the embedding job ended without a result".into()))?
    }
}
