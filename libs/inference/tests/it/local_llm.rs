//! The in-process Gemma 3 270M (GGUF): tokenizer, generation quality, streaming and
//! cancellation.
//!
//! Needs `gemma3-270m/gemma-3-270m-q4_k_m.gguf` (`scripts/fetch-models.sh --with-llm`) in
//! `$DOCCHAT_TEST_MODELS_DIR`, else `$DOCCHAT_MODELS_DIR`, else `<repo>/models`; without it
//! each test fails in CI and says loudly that it is skipped elsewhere
//! (`docchat_common::testing::model_file`).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docchat_inference::local::GenParams;
use docchat_inference::{
    ChatMessage, ChatModel, LocalChat, LocalModel, LocalOptions, Registry, StreamEvent,
    find_local_models,
};

use docchat_common::testing::{GEMMA_GGUF, models_dir};

/// The GGUF file, or None (after `unavailable`: a failure in CI) when it has not been
/// fetched.
fn model_file() -> Option<PathBuf> {
    docchat_common::testing::model_file(GEMMA_GGUF)
}

fn options() -> LocalOptions {
    LocalOptions {
        threads: 2,
        context: 4096,
        seed: Some(42),
    }
}

/// One model for the tests that call it directly.
fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    let path = model_file()?;
    MODEL
        .get_or_init(|| Some(LocalModel::load(&path, &options()).unwrap()))
        .as_ref()
}

/// One chat model (its own worker) for the tests of the chat surface.
fn chat() -> Option<&'static LocalChat> {
    static CHAT: OnceLock<LocalChat> = OnceLock::new();
    let path = model_file()?;
    Some(CHAT.get_or_init(|| LocalChat::new("gemma-3-270m", path, options())))
}

#[test]
fn tokenizer_matches_the_vocabulary() {
    let Some(m) = model() else {
        return;
    };
    let t = m.tokenizer();
    assert_eq!(t.vocab_size(), 262_144);
    assert_eq!(t.bos(), 2);
    assert_eq!(t.eos(), 1);
    assert_eq!(t.token_id("<start_of_turn>"), Some(105));
    assert_eq!(t.token_id("<end_of_turn>"), Some(106));
    // No space is prepended (add_space_prefix = false): "Hello" then "▁world".
    let ids = t.encode("Hello world");
    assert_eq!(ids, vec![9259, 1902], "{:?}", pieces(m, &ids));
    assert_eq!(t.encode(" Paris"), vec![9079]);
    // Newlines and runs of spaces are user-defined tokens.
    assert_eq!(t.encode("\n"), vec![107]);
    assert_eq!(t.encode("\n\n"), vec![108]);
    assert_eq!(t.encode("a  b")[1], 138, "two spaces are one token");
    // Control tokens are never made from text.
    let ids = t.encode("<end_of_turn>");
    assert!(!ids.contains(&106) && ids.len() > 1, "{ids:?}");
    for text in [
        "The capital of France is Paris.",
        "  leading spaces, trailing\t\n",
        "naïve café — 東京 🚀 Ω≈ç√",
        "<table><tr><td>1</td></tr></table>",
        "mixed\r\nline endings\n\n\nand    tabs\t\t",
        "",
    ] {
        let ids = t.encode(text);
        assert_eq!(t.decode(&ids), text, "{:?}", pieces(m, &ids));
    }
}

fn pieces(m: &LocalModel, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&i| m.tokenizer().piece(i).unwrap_or("?").to_owned())
        .collect()
}

#[test]
fn greedy_continuation_knows_the_capital_of_france() {
    let Some(m) = model() else {
        return;
    };
    let t = m.tokenizer();
    // The base model continues a zero-shot "The capital of France is" with " the capital
    // of the country of France."; one example sets the pattern.
    let mut prompt = vec![t.bos()];
    prompt.extend(t.encode(
        "The capital of Italy is Rome. The capital of Japan is Tokyo. The capital of France is",
    ));
    let mut out = Vec::new();
    let stats = m
        .generate(&prompt, &GenParams::greedy(8), &|| false, &mut |id| {
            out.push(id);
            true
        })
        .unwrap();
    let text = t.decode(&out);
    eprintln!("continuation: {text:?} ({stats:?})");
    assert!(text.trim_start().starts_with("Paris"), "{text:?}");
    assert_eq!(stats.prompt_tokens, prompt.len());
    assert_eq!(stats.completion_tokens, out.len());
    // And without the examples the true sentence is the likelier one.
    let nll = |s: &str| {
        let mut ids = vec![t.bos()];
        ids.extend(t.encode(s));
        m.mean_nll(&ids).unwrap()
    };
    let paris = nll("The capital of France is Paris.");
    let london = nll("The capital of France is London.");
    assert!(paris < london, "Paris {paris} London {london}");
}

#[test]
fn perplexity_of_plain_english_is_low() {
    let Some(m) = model() else {
        return;
    };
    let t = m.tokenizer();
    let text = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks were striking thirteen. Water boils at one hundred degrees Celsius at sea level.";
    let mut ids = vec![t.bos()];
    ids.extend(t.encode(text));
    let nll = m.mean_nll(&ids).unwrap();
    let ppl = nll.exp();
    eprintln!("perplexity {ppl:.1} over {} tokens", ids.len() - 1);
    assert!(ppl < 100.0, "perplexity {ppl}");
    // A scrambled text is far less likely: the model reads its input.
    let mut scrambled = ids.clone();
    scrambled[1..].reverse();
    assert!(m.mean_nll(&scrambled).unwrap() > nll + 1.0);
}

#[test]
fn long_prompts_run_in_chunks_over_the_window() {
    // A prompt longer than one batched pass (512 tokens) and than the sliding window: the
    // second chunk must see the first through the cache, within the window.
    let Some(m) = model() else {
        return;
    };
    let t = m.tokenizer();
    let para = "Rivers carry water from the mountains to the sea, shaping valleys and plains along the way. ";
    let mut prompt = vec![t.bos()];
    while prompt.len() < 700 {
        prompt.extend(t.encode(para));
    }
    let params = GenParams::greedy(4);
    let mut a = Vec::new();
    m.generate(&prompt, &params, &|| false, &mut |id| {
        a.push(id);
        true
    })
    .unwrap();
    // The prompt is the paragraph's tokens over and over, so it continues with its start.
    let expect = t.encode(para);
    assert_eq!(a, expect[..4], "{:?}", t.decode(&a));
}

#[test]
fn shortlisted_logits_decode_as_exact_ones() {
    let Some(m) = model() else {
        return;
    };
    let t = m.tokenizer();
    let mut prompt = vec![t.bos()];
    prompt.extend(t.encode("In the beginning of the nineteenth century, the town"));
    let run = |exact: bool| {
        let mut params = GenParams::greedy(48);
        params.exact_logits = exact;
        params.stop_at_control = false;
        let mut out = Vec::new();
        m.generate(&prompt, &params, &|| false, &mut |id| {
            out.push(id);
            true
        })
        .unwrap();
        out
    };
    let (fast, exact) = (run(false), run(true));
    assert_eq!(t.decode(&fast), t.decode(&exact));
}

async fn collect(chat: &LocalChat, messages: &[ChatMessage], max: u32) -> (String, (u64, u64)) {
    let mut stream = chat.stream(messages, max, 0.0).await.unwrap();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        let StreamEvent::Delta(d) = event.unwrap();
        assert!(!d.is_empty());
        text.push_str(&d);
    }
    (text, stream.usage())
}

#[tokio::test]
async fn stream_and_complete_give_the_same_answer() {
    let Some(chat) = chat() else {
        return;
    };
    let messages = [
        ChatMessage::system("You are a helpful assistant. Answer in one sentence."),
        ChatMessage::user("What is the capital of France?"),
    ];
    let done = chat.complete(&messages, 40, 0.0).await.unwrap();
    let (streamed, usage) = collect(chat, &messages, 40).await;
    eprintln!("answer: {:?} usage {usage:?}", done.text);
    assert!(!done.text.is_empty());
    assert_eq!(streamed.trim_end(), done.text);
    assert_eq!(usage, (done.prompt_tokens, done.completion_tokens));
    assert!(done.prompt_tokens > 20 && done.completion_tokens > 0);
    assert!(done.completion_tokens <= 40);
    // Sampling runs and respects max_tokens.
    let sampled = chat.complete(&messages, 5, 0.8).await.unwrap();
    assert!(sampled.completion_tokens <= 5);
}

#[tokio::test]
async fn dropping_the_stream_stops_generation() {
    let Some(chat) = chat() else {
        return;
    };
    // An answer of up to 3000 tokens would take a minute; dropping the stream after two
    // pieces must free the worker at once, so the next request is answered quickly.
    let messages = [ChatMessage::user(
        "Write a very long story about a lighthouse keeper, with many chapters.",
    )];
    let mut stream = chat.stream(&messages, 3000, 0.7).await.unwrap();
    for _ in 0..2 {
        stream.next().await.unwrap().unwrap();
    }
    drop(stream);
    let started = Instant::now();
    let next = chat
        .complete(&[ChatMessage::user("Say hello.")], 8, 0.0)
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(next.completion_tokens <= 8);
    assert!(
        waited < Duration::from_secs(10),
        "the next request waited {waited:?}: the dropped generation kept running"
    );
}

#[tokio::test]
async fn registry_lists_the_local_model() {
    if model_file().is_none() {
        return;
    }
    let found = find_local_models(&models_dir(), 8192);
    let entry = found.iter().find(|e| e.name == "gemma-3-270m").unwrap();
    assert_eq!(entry.provider, "local");
    assert_eq!(entry.base_model(), "google/gemma-3-270m");
    assert_eq!(entry.context_length, 8192);
    assert_eq!((entry.input_price, entry.output_price), (0.0, 0.0));
    let registry = Registry::default().with_local_models(find_local_models(&models_dir(), 8192));
    let resolved = registry.resolve("auto").unwrap();
    assert_eq!(resolved.name, "gemma-3-270m");
    let model = ChatModel::from_entry(resolved, &options()).unwrap();
    assert_eq!(model.name(), "gemma-3-270m");
    assert!(matches!(model, ChatModel::Local(_)));
    // A configured upstream keeps its place as the default.
    let file = "[[models]]\nname = \"up\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let registry = Registry::parse(file)
        .unwrap()
        .with_local_models(find_local_models(&models_dir(), 8192));
    assert_eq!(registry.resolve("auto").unwrap().name, "up");
    assert_eq!(registry.chat_models().count(), 2);
}

#[test]
fn chat_model_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let m = ChatModel::Local(LocalChat::new(
        "x",
        "/nonexistent/model.gguf",
        LocalOptions::default(),
    ));
    let messages = [ChatMessage::user("hi")];
    send(&m.stream(&messages, 1, 0.0));
    send(&m.complete(&messages, 1, 0.0));
}

#[tokio::test]
async fn a_missing_model_file_fails_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.gguf");
    std::fs::write(&path, b"GGUF but not really").unwrap();
    for p in [path, dir.path().join("missing.gguf")] {
        let chat = LocalChat::new("broken", p, LocalOptions::default());
        let err = chat
            .complete(&[ChatMessage::user("hi")], 4, 0.0)
            .await
            .unwrap_err();
        assert!(
            matches!(err, docchat_inference::ChatError::Local(_)),
            "{err}"
        );
    }
}
