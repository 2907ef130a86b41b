//! Local chat models: GGUF files under the models dir run in-process on the CPU.
//!
//! Supported: Llama-architecture files (`general.architecture = "llama"`, e.g. SmolLM2-135M
//! Instruct in Q4_1, the built-in chat model that `scripts/fetch-models.sh --with-llm`
//! fetches) and Qwen2 ones (`"qwen2"`: Qwen2 and Qwen2.5, e.g. Qwen2.5-Coder-0.5B Instruct
//! in Q4_K_M, which `scripts/fetch-models.sh --with-llm=qwen` fetches), each with its
//! byte-level BPE vocabulary, and Gemma 3 (`"gemma3"`) with its SentencePiece one. Qwen3
//! (`"qwen3"`: per-head norms of queries and keys, no biases) is refused, as is any other
//! architecture. Any ggml block type among F32/F16/BF16/Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K
//! is read; see [`decoder`] for how the weights are kept.
//!
//! [`LocalChat`] is the chat-model face: the first request starts one worker thread, which
//! loads the model (a second or so) and then runs requests one after another, queueing the
//! rest; tokens reach the caller through a channel, and a caller that drops its
//! [`ChatStream`](crate::ChatStream) stops the generation at the next token (or the next
//! layer of a prompt pass).
//!
//! Only instruction-tuned files are offered for chat ([`find_local_models`]): a file must
//! carry a chat template (`tokenizer.chat_template`) and the turn tokens of a format laid
//! out here. A base checkpoint (such as the Gemma 3 270M file the Gemma tests use) only
//! continues text — asked a question, it echoes the prompt — so it is never listed, and so
//! never the target of `auto`.
//!
//! Prompt formats, chosen by the vocabulary's turn tokens ([`ChatFormat`]):
//! - ChatML (`<|im_start|>`, `<|im_end|>`; SmolLM2, Qwen2): the system messages, joined, as
//!   the first `system` turn — or the template's own default system prompt when there is
//!   none (SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
//!   Qwen2.5's "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") —
//!   then `<|im_start|>{role}\n{content}<|im_end|>\n` for each message, and
//!   `<|im_start|>assistant\n` to answer.
//! - Gemma (`<start_of_turn>`, `<end_of_turn>`):
//!   `<bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n<start_of_turn>model\n`,
//!   with system messages folded into the first user turn as Gemma's own template does, and
//!   earlier assistant messages as `model` turns.
//!
//! Control tokens are added by id, never parsed from message text. Generation stops at the
//! end-of-sequence token, the format's end of turn or any other control token, or after
//! `max_tokens`.

mod bpe;
mod decoder;
mod gemma3;
mod gguf;
mod llama;
mod nibbles;
mod ops;
mod quant;
mod qwen2;
mod sketch;
mod tokenizer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use tokenizer::Tokenizer;

use super::{ChatError, ChatMessage, ChatStream, Completion, EventSource, StreamEvent};
use crate::registry::{ModelEntry, ModelKind};
use decoder::{Decoder, Logits, PREFILL_CHUNK};
use gguf::Gguf;

/// Context served when the options do not say: the KV cache and rotary tables are sized to
/// it (SmolLM2 was trained on 8192, Gemma 3 270M on 32 768).
pub const DEFAULT_CONTEXT: usize = 8192;

/// Failures of loading or running a local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid model file {path}: {message}")]
    InvalidModel { path: PathBuf, message: String },
    #[error("{tokens} tokens do not fit the model's context of {context}")]
    ContextExceeded { tokens: usize, context: usize },
    #[error("generation failed: {0}")]
    Generation(String),
    #[error(
        "the model has no chat format (its vocabulary has neither ChatML's nor Gemma's turn tokens)"
    )]
    NoChatFormat,
}

impl From<LocalError> for ChatError {
    fn from(e: LocalError) -> ChatError {
        ChatError::Local(e.to_string())
    }
}

/// How local models run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// Threads of a model's pool; 0 = one per available CPU (`DOCCHAT_LLM_THREADS`).
    pub threads: usize,
    /// Most tokens (prompt and answer) one request may hold.
    pub context: usize,
    /// Seed of the sampler (temperature > 0); `None` seeds from the clock.
    pub seed: Option<u64>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            threads: 0,
            context: DEFAULT_CONTEXT,
            seed: None,
        }
    }
}

impl LocalOptions {
    fn thread_count(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// Sampling settings of one generation.
#[derive(Debug, Clone)]
pub struct GenParams {
    pub max_tokens: usize,
    /// 0 = greedy.
    pub temperature: f32,
    /// Sampling keeps the `top_k` likeliest tokens (64 by default)...
    pub top_k: usize,
    /// ...and of those the fewest whose probabilities reach `top_p` (0.95).
    pub top_p: f32,
    pub seed: u64,
    /// Whether control tokens (`<eos>`, `<end_of_turn>`, ...) end the generation; when not,
    /// the likeliest other token is taken instead (benchmarks use it to decode a fixed
    /// number of tokens).
    pub stop_at_control: bool,
    /// Score the whole vocabulary exactly for every token instead of shortlisting the
    /// likeliest [`SHORTLIST`] (or `top_k`) with the 4-bit sketch of the embedding; slower.
    pub exact_logits: bool,
    /// The logits of the tokens generated in the last [`REPEAT_WINDOW`] are divided by this
    /// (multiplied, when negative), as llama.cpp's repeat penalty does; 1 turns it off.
    /// Small models decoding greedily otherwise fall into loops ("paperpaperpaper...").
    pub repeat_penalty: f32,
}

/// How many of the latest generated tokens the repeat penalty looks at.
pub const REPEAT_WINDOW: usize = 64;

/// The repeat penalty of chat completions (llama.cpp's default).
pub const CHAT_REPEAT_PENALTY: f32 = 1.1;

/// Tokens shortlisted by the 4-bit sketch of the output embedding and then scored exactly,
/// at least.
pub const SHORTLIST: usize = sketch::SKETCH_CANDIDATES;

impl GenParams {
    pub fn greedy(max_tokens: usize) -> GenParams {
        GenParams {
            max_tokens,
            temperature: 0.0,
            top_k: 64,
            top_p: 0.95,
            seed: 0,
            stop_at_control: true,
            exact_logits: false,
            repeat_penalty: 1.0,
        }
    }

    /// A chat completion's: the caller's length and temperature, the repeat penalty on.
    pub fn chat(max_tokens: usize, temperature: f32, seed: u64) -> GenParams {
        GenParams {
            temperature,
            seed,
            repeat_penalty: CHAT_REPEAT_PENALTY,
            ..GenParams::greedy(max_tokens)
        }
    }
}

/// Applies the repeat `penalty` to `logits` once for each distinct token of `recent`.
fn penalize_repeats(logits: &mut [f32], recent: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let mut seen: Vec<u32> = Vec::with_capacity(recent.len());
    for &t in recent {
        if seen.contains(&t) {
            continue;
        }
        seen.push(t);
        if let Some(l) = logits.get_mut(t as usize).filter(|l| l.is_finite()) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

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

/// How a model's messages are laid out (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatFormat {
    ChatMl {
        im_start: u32,
        im_end: u32,
        /// The template's system prompt for conversations without one.
        default_system: Option<String>,
    },
    Gemma {
        start_of_turn: u32,
        end_of_turn: u32,
    },
}

impl ChatFormat {
    /// The format of a vocabulary (and its chat template, if the file has one).
    fn detect(t: &Tokenizer, template: Option<&str>) -> Option<ChatFormat> {
        if let (Some(im_start), Some(im_end)) =
            (t.token_id("<|im_start|>"), t.token_id("<|im_end|>"))
        {
            return Some(ChatFormat::ChatMl {
                im_start,
                im_end,
                default_system: template.and_then(default_system_prompt),
            });
        }
        match (t.token_id("<start_of_turn>"), t.token_id("<end_of_turn>")) {
            (Some(start_of_turn), Some(end_of_turn)) => Some(ChatFormat::Gemma {
                start_of_turn,
                end_of_turn,
            }),
            _ => None,
        }
    }

    fn end_of_turn(&self) -> u32 {
        match *self {
            ChatFormat::ChatMl { im_end, .. } => im_end,
            ChatFormat::Gemma { end_of_turn, .. } => end_of_turn,
        }
    }
}

/// The system prompt a ChatML template writes when the first message is not a system one:
/// the first string literal of the template that holds a whole system turn of plain text,
/// `'<|im_start|>system\n{prompt}<|im_end|>`. SmolLM2's writes it under
/// `{% if loop.first and messages[0]['role'] != 'system' %}`, Qwen2.5's in the `else` of
/// `{%- if messages[0]['role'] == 'system' %}`. A turn built from the messages
/// (`'<|im_start|>system\n' + messages[0]['content'] + ...`) ends its literal before any
/// text and is no prompt, nor is text with quotes, braces, `+` or escapes in it.
fn default_system_prompt(template: &str) -> Option<String> {
    const OPEN: &str = "<|im_start|>system";
    let mut at = 0;
    while let Some(found) = template[at..].find(OPEN) {
        let open = at + found;
        at = open + OPEN.len();
        // The turn starts a string literal: its quote stands right before.
        let Some(quote @ ('\'' | '"')) = template[..open].chars().next_back() else {
            continue;
        };
        // The newline after the role: the character itself (SmolLM2) or the escape `\n`
        // (Qwen2.5).
        let rest = &template[at..];
        let Some(rest) = rest.strip_prefix('\n').or_else(|| rest.strip_prefix("\\n")) else {
            continue;
        };
        let literal = &rest[..rest.find(quote).unwrap_or(rest.len())];
        let Some(len) = literal.find("<|im_end|>") else {
            continue;
        };
        let prompt = literal[..len].trim();
        if !prompt.is_empty() && !prompt.contains(['{', '}', '\'', '"', '+', '\\']) {
            return Some(prompt.to_owned());
        }
    }
    None
}

/// The decoder configuration of a file, read by its family (`general.architecture`).
fn model_config(g: &Gguf) -> Result<decoder::Config, LocalError> {
    let arch = g.string("general.architecture").unwrap_or_default();
    match arch {
        "gemma3" => gemma3::config(g)?.check(g),
        "llama" => llama::config(g)?.check(g),
        "qwen2" => qwen2::config(g)?.check(g),
        "qwen3" => Err(g.bad(
            "architecture \"qwen3\" is not supported: Qwen3 normalizes each query and key head \
             (attn_q_norm, attn_k_norm) and has no projection biases, which the decoder does \
             not run; Qwen2 and Qwen2.5 (\"qwen2\") are supported",
        )),
        _ => Err(g.bad(format!(
            "architecture {arch:?} is not supported (gemma3, llama, qwen2)"
        ))),
    }
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

    /// The prompt of `messages` in the model's chat format (see the module docs).
    pub fn chat_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, LocalError> {
        let t = &self.tokenizer;
        let system: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.trim())
            .filter(|c| !c.is_empty())
            .collect();
        let system = (!system.is_empty()).then(|| system.join("\n\n"));
        let mut ids = t.start();
        let turn = |ids: &mut Vec<u32>, (open, close): (u32, u32), role: &str, content: &str| {
            ids.push(open);
            ids.extend(t.encode(&format!("{role}\n")));
            ids.extend(t.encode(content));
            ids.push(close);
            ids.extend(t.encode("\n"));
        };
        let talk = messages.iter().filter(|m| m.role != "system");
        match self.format.as_ref().ok_or(LocalError::NoChatFormat)? {
            ChatFormat::ChatMl {
                im_start,
                im_end,
                default_system,
            } => {
                let marks = (*im_start, *im_end);
                if let Some(s) = system.as_deref().or(default_system.as_deref()) {
                    turn(&mut ids, marks, "system", s);
                }
                for m in talk {
                    let role = if m.role == "assistant" || m.role == "model" {
                        "assistant"
                    } else {
                        "user"
                    };
                    turn(&mut ids, marks, role, m.content.trim());
                }
                ids.push(*im_start);
                ids.extend(t.encode("assistant\n"));
            }
            ChatFormat::Gemma {
                start_of_turn,
                end_of_turn,
            } => {
                let marks = (*start_of_turn, *end_of_turn);
                let mut pending_system = system;
                for m in talk {
                    if m.role == "assistant" || m.role == "model" {
                        turn(&mut ids, marks, "model", m.content.trim());
                        continue;
                    }
                    let content = match pending_system.take() {
                        Some(s) => format!("{s}\n\n{}", m.content.trim()),
                        None => m.content.trim().to_owned(),
                    };
                    turn(&mut ids, marks, "user", &content);
                }
                if let Some(s) = pending_system {
                    turn(&mut ids, marks, "user", &s);
                }
                ids.push(*start_of_turn);
                ids.extend(t.encode("model\n"));
            }
        }
        Ok(ids)
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

/// A small seeded generator (SplitMix64) for sampling.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The next token: the argmax at temperature 0, else a draw from the top-k / top-p
/// distribution at that temperature.
fn sample(logits: &mut [f32], params: &GenParams, rng: &mut SplitMix64) -> u32 {
    let argmax = logits
        .iter()
        .enumerate()
        .fold((0usize, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 { (i, v) } else { best }
        })
        .0;
    if params.temperature <= 0.0 || params.top_k <= 1 {
        return argmax as u32;
    }
    // Only scored tokens can be drawn: with a shortlist, a thousand of the vocabulary.
    let mut idx: Vec<u32> = (0..logits.len() as u32)
        .filter(|&i| logits[i as usize] > f32::NEG_INFINITY)
        .collect();
    if idx.is_empty() {
        return argmax as u32;
    }
    let k = params.top_k.min(idx.len());
    idx.select_nth_unstable_by(k - 1, |&a, &b| {
        logits[b as usize].total_cmp(&logits[a as usize])
    });
    idx.truncate(k);
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    let max = logits[idx[0] as usize];
    let mut probs: Vec<f32> = idx
        .iter()
        .map(|&i| ((logits[i as usize] - max) / params.temperature).exp())
        .collect();
    let sum: f32 = probs.iter().sum();
    let mut cum = 0.0;
    let mut keep = probs.len();
    for (j, p) in probs.iter_mut().enumerate() {
        *p /= sum;
        cum += *p;
        if cum >= params.top_p {
            keep = j + 1;
            break;
        }
    }
    let total: f32 = probs[..keep].iter().sum();
    let mut r = rng.next_f32() * total;
    for (j, &p) in probs[..keep].iter().enumerate() {
        if r < p {
            return idx[j];
        }
        r -= p;
    }
    idx[keep - 1]
}

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

    /// The local model of a registry entry found by [`find_local_models`].
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
        let mut text = tokenizer::take_utf8(&mut pending);
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

/// Chat-model entries for the GGUF files in `models_dir` and its subdirectories (one level
/// down, as `scripts/fetch-models.sh` lays them out), smallest file first: provider `local`, prices 0, the context
/// of the file capped at `context_cap`. Files of unsupported architectures, unreadable files
/// and a missing directory are skipped (and logged).
pub fn find_local_models(models_dir: &Path, context_cap: usize) -> Vec<ModelEntry> {
    let mut files = Vec::new();
    let mut dirs = vec![models_dir.to_owned()];
    if let Ok(rd) = std::fs::read_dir(models_dir) {
        let mut subdirs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        dirs.extend(subdirs);
    }
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "gguf"))
            .collect();
        found.sort();
        files.extend(found);
    }
    // The smallest (fastest) first: `auto` goes to it unless DOCCHAT_DEFAULT_MODEL names
    // another (`scripts/run.sh --llm=…` sets it for the model it fetched).
    files.sort_by_key(|p| std::fs::metadata(p).map_or(u64::MAX, |m| m.len()));
    let mut entries: Vec<ModelEntry> = Vec::new();
    for path in files {
        match entry_for(&path, context_cap) {
            Ok(entry) if entries.iter().any(|e| e.name == entry.name) => {
                tracing::warn!(path = %path.display(), name = %entry.name, "a second local model of the same name is ignored");
            }
            Ok(entry) => entries.push(entry),
            Err(e) => tracing::info!(path = %path.display(), error = %e, "local model skipped"),
        }
    }
    entries
}

fn entry_for(path: &Path, context_cap: usize) -> Result<ModelEntry, LocalError> {
    let g = Gguf::open(path)?;
    let cfg = model_config(&g)?;
    // Base checkpoints carry no chat template: they continue text and cannot hold a chat.
    let template = g.string("tokenizer.chat_template").ok_or_else(|| {
        g.bad("no chat template: a base (not instruction-tuned) model is not offered for chat")
    })?;
    let tokenizer = Tokenizer::from_gguf(&g)?;
    if ChatFormat::detect(&tokenizer, Some(template)).is_none() {
        return Err(LocalError::NoChatFormat);
    }
    let (name, display_name, base_model) = model_names(&g, path, cfg.family);
    Ok(ModelEntry {
        display_name,
        provider: "local".into(),
        base_url: format!("file://{}", path.display()),
        upstream_model: None,
        api_key_env: None,
        api_key: None,
        base_model: Some(base_model),
        context_length: cfg.trained_context.min(context_cap.max(1)) as u64,
        input_price: 0.0,
        output_price: 0.0,
        vision: false,
        tools: false,
        default: false,
        kind: ModelKind::Chat,
        dimensions: None,
        max_documents: None,
        local_path: Some(path.to_owned()),
        name,
    })
}

/// The registry name, display name and base model of a file: the name from the metadata's
/// base name and size (`smollm2-135m`), with the tuning that the metadata's fine-tune
/// (Qwen's `Instruct-AWQ`) or else the file name states (`-instruct`, `-it`, `-chat`).
/// The name as spelled with capitals is the display name and, under the metadata's
/// organization (else the family's: `google`, `Qwen`), the base model: the file name's
/// spelling when its start spells the name (`SmolLM2-135M-Instruct.Q4_1.gguf` →
/// `HuggingFaceTB/SmolLM2-135M-Instruct`), else the metadata's (base name `Qwen2.5-Coder`,
/// size `0.5B`, fine-tune `Instruct-AWQ` → `Qwen/Qwen2.5-Coder-0.5B-Instruct`); without
/// capitals in either, the file name's own spelling, with the metadata's `general.name` as
/// the display name.
fn model_names(g: &Gguf, path: &Path, family: decoder::Family) -> (String, Option<String>, String) {
    let arch = match family {
        decoder::Family::Gemma3 => "gemma-3",
        decoder::Family::Llama => "llama",
        decoder::Family::Qwen2 => "qwen2",
    };
    let base = g
        .string("general.basename")
        .unwrap_or(arch)
        .replace(' ', "-");
    let size = g.string("general.size_label").unwrap_or("");
    // The name as the metadata spells it.
    let mut meta = base.clone();
    if !size.is_empty() {
        meta = format!("{meta}-{size}");
    }
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
    let stem = file.strip_suffix(".gguf").unwrap_or(file);
    let tuning = |text: &str| -> Option<String> {
        text.split(['-', '_', ' ', '.'])
            .find(|w| matches!(w.to_lowercase().as_str(), "instruct" | "it" | "chat"))
            .map(str::to_owned)
    };
    if let Some(t) = g
        .string("general.finetune")
        .and_then(tuning)
        .or_else(|| tuning(stem))
        && !meta
            .to_lowercase()
            .ends_with(&format!("-{}", t.to_lowercase()))
    {
        meta = format!("{meta}-{t}");
    }
    let name = meta.to_lowercase();
    let org = g.string("general.organization").or(match family {
        decoder::Family::Gemma3 => Some("google"),
        decoder::Family::Qwen2 => Some("Qwen"),
        decoder::Family::Llama => None,
    });
    // The file's spelling: its start, up to a separator (the quantization follows).
    let from_file = stem
        .get(..name.len())
        .filter(|s| s.eq_ignore_ascii_case(&name))
        .filter(|_| {
            stem[name.len()..].is_empty() || stem[name.len()..].starts_with(['.', '-', '_'])
        });
    let capitals = |s: &str| s.chars().any(char::is_uppercase);
    let spelled = match from_file {
        Some(f) if capitals(f) => Some(f),
        _ if capitals(&base) => Some(meta.as_str()),
        _ => from_file,
    };
    let repo = spelled.unwrap_or(&name);
    let base_model = match org {
        Some(org) => format!("{org}/{repo}"),
        None => repo.to_owned(),
    };
    let display = match spelled {
        Some(s) if capitals(s) => Some(s),
        _ => g.string("general.name").or(spelled),
    };
    (name, display.map(str::to_owned), base_model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeat_penalty_lowers_recent_tokens_only_once_each() {
        let mut logits = vec![2.0, 1.9, -1.0, 0.5, f32::NEG_INFINITY];
        // Token 0 twice in the window: penalized once; token 4 stays unscored.
        penalize_repeats(&mut logits, &[0, 2, 0, 4], 1.1);
        assert_eq!(logits[0], 2.0 / 1.1);
        assert_eq!(logits[2], -1.1);
        assert_eq!(logits[1], 1.9);
        assert_eq!(logits[4], f32::NEG_INFINITY);
        // Greedy now leaves the repeated token for the next best one.
        let mut rng = SplitMix64(1);
        assert_eq!(sample(&mut logits, &GenParams::greedy(1), &mut rng), 1);
        // 1 is off.
        let mut same = vec![2.0, 1.9];
        penalize_repeats(&mut same, &[0, 0], 1.0);
        assert_eq!(same, [2.0, 1.9]);
    }

    #[test]
    fn chat_completions_penalize_repeats_and_greedy_runs_do_not() {
        let chat = GenParams::chat(32, 0.3, 7);
        assert_eq!(chat.repeat_penalty, CHAT_REPEAT_PENALTY);
        assert_eq!((chat.max_tokens, chat.temperature, chat.seed), (32, 0.3, 7));
        assert_eq!(GenParams::greedy(32).repeat_penalty, 1.0);
    }

    #[test]
    fn greedy_picks_argmax_and_sampling_stays_in_top_k() {
        let mut logits = vec![0.0, 3.0, 1.0, 2.9, -5.0];
        let mut rng = SplitMix64(7);
        assert_eq!(sample(&mut logits, &GenParams::greedy(1), &mut rng), 1);
        let params = GenParams {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
            ..GenParams::greedy(1)
        };
        let mut seen = [0usize; 5];
        for _ in 0..2000 {
            seen[sample(&mut logits, &params, &mut rng) as usize] += 1;
        }
        assert_eq!(seen[0] + seen[2] + seen[4], 0);
        assert!(seen[1] > 800 && seen[3] > 800, "{seen:?}");
        // Tokens a shortlist left unscored are never drawn, even when top_k reaches them.
        let mut short = vec![
            f32::NEG_INFINITY,
            1.0,
            f32::NEG_INFINITY,
            1.0,
            f32::NEG_INFINITY,
        ];
        let wide = GenParams { top_k: 5, ..params };
        let mut seen = [0usize; 5];
        for _ in 0..200 {
            seen[sample(&mut short, &wide, &mut rng) as usize] += 1;
        }
        // Both scored tokens are drawn (fewer scored tokens than top_k still samples).
        assert_eq!(seen[0] + seen[2] + seen[4], 0);
        assert!(seen[1] > 50 && seen[3] > 50, "{seen:?}");
    }

    #[test]
    fn default_system_prompts_of_chatml_templates() {
        // SmolLM2's (newlines as characters), under `!= 'system'`.
        let smollm2 = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
        assert_eq!(
            default_system_prompt(smollm2).as_deref(),
            Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face")
        );
        // Qwen2.5's (newlines as escapes), in the `else` of `== 'system'`, after a tools
        // branch and a turn built from the first message.
        let qwen = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}"#;
        assert_eq!(
            default_system_prompt(qwen).as_deref(),
            Some("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
        );
        // Only turns built from the messages, or none at all: no default.
        for none in [
            "{{ '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}",
            "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' }}",
            "{{ \"<|im_start|>system\\n{{ x }}<|im_end|>\" }}",
            "",
        ] {
            assert_eq!(default_system_prompt(none), None, "{none:?}");
        }
    }

    /// A GGUF file `file` in `dir` with string metadata only (no tensors).
    fn metadata_only(dir: &Path, file: &str, kv: &[(&str, &str)]) -> (Gguf, PathBuf) {
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend((s.len() as u64).to_le_bytes());
            b.extend(s.as_bytes());
        };
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend((kv.len() as u64).to_le_bytes());
        for (k, v) in kv {
            string(&mut b, k);
            b.extend(8u32.to_le_bytes());
            string(&mut b, v);
        }
        let path = dir.join(file);
        std::fs::write(&path, b).unwrap();
        (Gguf::open(&path).unwrap(), path)
    }

    #[test]
    fn local_models_are_named_from_their_metadata_and_file_name() {
        use decoder::Family;
        let dir = tempfile::tempdir().unwrap();
        let names = |file: &str, family: Family, kv: &[(&str, &str)]| {
            let (g, path) = metadata_only(dir.path(), file, kv);
            let (name, display, base) = model_names(&g, &path, family);
            (name, display.unwrap_or_default(), base)
        };
        let owned = |n: &str, d: &str, b: &str| (n.to_owned(), d.to_owned(), b.to_owned());
        // SmolLM2: the tuning and the spelling from the file name, the organization stated.
        let smollm2 = [
            ("general.basename", "smollm2"),
            ("general.size_label", "135M"),
            ("general.organization", "HuggingFaceTB"),
            ("general.finetune", "8k-lc100k-mix1-ep2"),
            ("general.name", "Smollm2 135M 8k Lc100K Mix1 Ep2"),
        ];
        assert_eq!(
            names("SmolLM2-135M-Instruct.Q4_1.gguf", Family::Llama, &smollm2),
            owned(
                "smollm2-135m-instruct",
                "SmolLM2-135M-Instruct",
                "HuggingFaceTB/SmolLM2-135M-Instruct"
            )
        );
        // Qwen: the tuning from the fine-tune, the spelling from the metadata (the file name
        // is all lower case), Qwen's organization; the same under any file name.
        let qwen = [
            ("general.basename", "Qwen2.5-Coder"),
            ("general.size_label", "0.5B"),
            ("general.finetune", "Instruct-AWQ"),
            ("general.name", "Qwen2.5 Coder 0.5B Instruct AWQ"),
        ];
        let want = owned(
            "qwen2.5-coder-0.5b-instruct",
            "Qwen2.5-Coder-0.5B-Instruct",
            "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        );
        for file in ["qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "model.gguf"] {
            assert_eq!(names(file, Family::Qwen2, &qwen), want, "{file}");
        }
        // All lower case in both: the file's spelling, the metadata's display name.
        let gemma = [
            ("general.basename", "gemma-3"),
            ("general.size_label", "270M"),
            ("general.name", "Gemma 3 270m"),
        ];
        assert_eq!(
            names("gemma-3-270m-it-q4_k_m.gguf", Family::Gemma3, &gemma),
            owned("gemma-3-270m-it", "Gemma 3 270m", "google/gemma-3-270m-it")
        );
        assert_eq!(
            names("gemma-3-270m-q4_k_m.gguf", Family::Gemma3, &gemma),
            owned("gemma-3-270m", "Gemma 3 270m", "google/gemma-3-270m")
        );
    }

    #[test]
    fn missing_models_dir_means_no_local_models() {
        let dir = tempfile::tempdir().unwrap();
        assert!(find_local_models(&dir.path().join("nope"), 8192).is_empty());
        std::fs::write(dir.path().join("junk.gguf"), b"not a model").unwrap();
        assert!(find_local_models(dir.path(), 8192).is_empty());
    }
}
