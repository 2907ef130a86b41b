//! A loaded local model: loading a GGUF file, generating after a prompt, perplexity.

use std::path::Path;
use std::time::{Duration, Instant};

use super::decoder::{Decoder, Logits, PREFILL_CHUNK};
use super::gguf::Gguf;
use super::prompt::ChatFormat;
use super::sampling::{GenParams, REPEAT_WINDOW, SplitMix64, penalize_repeats, sample};
use super::tokenizer::Tokenizer;
use super::{LocalError, LocalOptions, model_config};
use crate::chat::ChatMessage;

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-turn or other control token.
    EndOfTurn,
    /// `max_tokens`, or the end of the context.
    Length,
    /// The caller stopped it.
    Cancelled,
}

/// Figures of one generation.
#[derive(Debug, Clone)]
pub struct GenStats {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// The prompt pass, up to the first token's logits.
    pub prefill: Duration,
    /// Every later pass.
    pub decode: Duration,
    pub stop: StopReason,
    /// The control token that ended it ([`StopReason::EndOfTurn`]).
    pub stop_token: Option<u32>,
}

/// A loaded local model with its tokenizer and its own thread pool.
pub struct LocalModel {
    model: Decoder,
    tokenizer: Tokenizer,
    pool: rayon::ThreadPool,
    threads: usize,
    format: Option<ChatFormat>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("context", &self.model.context)
            .field("threads", &self.threads)
            .finish()
    }
}

impl LocalModel {
    /// Loads a GGUF file (on the calling thread; about a second for 100M-odd parameters).
    pub fn load(path: &Path, options: &LocalOptions) -> Result<LocalModel, LocalError> {
        let started = Instant::now();
        let threads = options.thread_count();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("docchat-llm-{i}"))
            .build()
            .map_err(|e| LocalError::Generation(format!("cannot start the model threads: {e}")))?;
        let g = Gguf::open(path)?;
        let tokenizer = Tokenizer::from_gguf(&g)?;
        let cfg = model_config(&g)?;
        let model = pool.install(|| Decoder::load(&g, cfg, options.context))?;
        if tokenizer.vocab_size() != model.cfg.vocab {
            return Err(g.bad(format!(
                "the vocabulary has {} tokens but the embedding {}",
                tokenizer.vocab_size(),
                model.cfg.vocab
            )));
        }
        tracing::info!(
            path = %path.display(),
            threads,
            context = model.context,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "local chat model loaded"
        );
        Ok(LocalModel {
            format: ChatFormat::detect(&tokenizer, g.string("tokenizer.chat_template")),
            model,
            tokenizer,
            pool,
            threads,
        })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Most tokens (prompt and answer) a generation may hold.
    pub fn context_length(&self) -> usize {
        self.model.context
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How the model's chat prompts are laid out; `None` when it has no known format.
    pub fn chat_format(&self) -> Option<&ChatFormat> {
        self.format.as_ref()
    }

    /// The prompt of `messages` in the model's chat format (see the [`local`](super) module
    /// docs).
    pub fn chat_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, LocalError> {
        let format = self.format.as_ref().ok_or(LocalError::NoChatFormat)?;
        Ok(format.prompt(&self.tokenizer, messages))
    }

    /// Generates after `prompt` (which should start with [`Tokenizer::start`]). Each new
    /// token goes to `on_token`, which returns false to stop; `cancelled` is also polled
    /// during the prompt pass. Runs on the model's pool (the calling thread waits).
    pub fn generate(
        &self,
        prompt: &[u32],
        params: &GenParams,
        cancelled: &(dyn Fn() -> bool + Sync),
        on_token: &mut (dyn FnMut(u32) -> bool + Send),
    ) -> Result<GenStats, LocalError> {
        if prompt.is_empty() {
            return Err(LocalError::Generation("the prompt is empty".into()));
        }
        if prompt.len() >= self.model.context {
            return Err(LocalError::ContextExceeded {
                tokens: prompt.len() + 1,
                context: self.model.context,
            });
        }
        self.pool.install(|| {
            let started = Instant::now();
            let mut stats = GenStats {
                prompt_tokens: prompt.len(),
                completion_tokens: 0,
                prefill: Duration::ZERO,
                decode: Duration::ZERO,
                stop: StopReason::Length,
                stop_token: None,
            };
            let mut cache = self.model.new_cache(prompt.len() + params.max_tokens);
            let want = if params.exact_logits {
                Logits::Last
            } else {
                Logits::Shortlist(params.top_k)
            };
            let mut logits = Vec::new();
            for chunk in prompt.chunks(PREFILL_CHUNK) {
                match self
                    .model
                    .forward(chunk, &mut cache, want, self.threads, cancelled)?
                {
                    Some(l) => logits = l,
                    None => {
                        stats.stop = StopReason::Cancelled;
                        return Ok(stats);
                    }
                }
            }
            stats.prefill = started.elapsed();
            let decode_start = Instant::now();
            let mut rng = SplitMix64(params.seed);
            let mut generated: Vec<u32> = Vec::new();
            while stats.completion_tokens < params.max_tokens {
                let recent = &generated[generated.len().saturating_sub(REPEAT_WINDOW)..];
                penalize_repeats(&mut logits, recent, params.repeat_penalty);
                let mut next = sample(&mut logits, params, &mut rng);
                if next == self.tokenizer.eos()
                    || self.format.as_ref().map(ChatFormat::end_of_turn) == Some(next)
                    || self.tokenizer.is_control(next)
                {
                    if params.stop_at_control {
                        stats.stop = StopReason::EndOfTurn;
                        stats.stop_token = Some(next);
                        break;
                    }
                    for (id, l) in logits.iter_mut().enumerate() {
                        if self.tokenizer.is_control(id as u32) {
                            *l = f32::NEG_INFINITY;
                        }
                    }
                    next = sample(&mut logits, &GenParams::greedy(1), &mut rng);
                }
                stats.completion_tokens += 1;
                generated.push(next);
                if !on_token(next) {
                    stats.stop = StopReason::Cancelled;
                    break;
                }
                if stats.completion_tokens >= params.max_tokens {
                    break;
                }
                if cache.len >= self.model.context {
                    break;
                }
                match self
                    .model
                    .forward(&[next], &mut cache, want, self.threads, cancelled)?
                {
                    Some(l) => logits = l,
                    None => {
                        stats.stop = StopReason::Cancelled;
                        break;
                    }
                }
            }
            stats.decode = decode_start.elapsed();
            Ok(stats)
        })
    }

    /// Mean negative log-likelihood (nats) of `ids[1..]`, each given the tokens before it:
    /// `exp` of it is the perplexity.
    pub fn mean_nll(&self, ids: &[u32]) -> Result<f64, LocalError> {
        if ids.len() < 2 || ids.len() > PREFILL_CHUNK {
            return Err(LocalError::Generation(format!(
                "perplexity needs 2..={PREFILL_CHUNK} tokens"
            )));
        }
        self.pool.install(|| {
            let mut cache = self.model.new_cache(ids.len());
            let vocab = self.model.cfg.vocab;
            let logits = self
                .model
                .forward(ids, &mut cache, Logits::All, self.threads, &|| false)?
                .ok_or_else(|| LocalError::Generation("cancelled".into()))?;
            let mut total = 0f64;
            for (row, &next) in logits.chunks_exact(vocab).zip(&ids[1..]) {
                let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let sum: f64 = row.iter().map(|&v| f64::from(v - max).exp()).sum();
                total += sum.ln() - f64::from(row[next as usize] - max);
            }
            Ok(total / (ids.len() - 1) as f64)
        })
    }
}
