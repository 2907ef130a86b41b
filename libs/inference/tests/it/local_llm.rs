//! The in-process local chat models (GGUF): the built-in SmolLM2-135M Instruct (Llama
//! decoder, byte-level BPE, ChatML) and Qwen2.5-Coder-0.5B Instruct (Qwen2 decoder with
//! projection biases, Qwen2's byte-level BPE, ChatML) answering, and the base Gemma 3 270M
//! (Gemma decoder, SentencePiece) continuing text; tokenizers, generation quality,
//! streaming and cancellation, and which models the registry offers.
//!
//! Needs `smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf` and
//! `gemma3-270m/gemma-3-270m-q4_k_m.gguf` (`scripts/fetch-models.sh --with-llm`), and
//! `qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`
//! (`scripts/fetch-models.sh --with-llm=qwen`) in `$DOCCHAT_TEST_MODELS_DIR`, else
//! `$DOCCHAT_MODELS_DIR`, else `<repo>/models`; without them each test fails in CI and says
//! loudly that it is skipped elsewhere (`docchat_common::testing::model_file`).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docchat_inference::local::{ChatFormat, GenParams, StopReason};
use docchat_inference::{
    ChatMessage, ChatModel, LocalChat, LocalModel, LocalOptions, Registry, StreamEvent,
    find_local_models,
};

use docchat_common::testing::{GEMMA_GGUF, QWEN_GGUF, SMOLLM2_GGUF};

/// A GGUF file, or None (after `unavailable`: a failure in CI) when it has not been
/// fetched.
fn model_file(relative: &str) -> Option<PathBuf> {
    docchat_common::testing::model_file(relative)
}

fn options() -> LocalOptions {
    LocalOptions {
        threads: 2,
        context: 4096,
        seed: Some(42),
    }
}

fn load(
    cell: &'static OnceLock<Option<LocalModel>>,
    relative: &str,
) -> Option<&'static LocalModel> {
    let path = model_file(relative)?;
    cell.get_or_init(|| Some(LocalModel::load(&path, &options()).unwrap()))
        .as_ref()
}

/// The base Gemma 3 270M, for the tests that call it directly.
fn gemma() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    load(&MODEL, GEMMA_GGUF)
}

/// The built-in SmolLM2-135M Instruct, for the tests that call it directly.
fn smollm2() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    load(&MODEL, SMOLLM2_GGUF)
}

/// Qwen2.5-Coder-0.5B Instruct, for the tests that call it directly.
fn qwen() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    load(&MODEL, QWEN_GGUF)
}

/// One chat model (its own worker) for the tests of the chat surface: the built-in one.
fn chat() -> Option<&'static LocalChat> {
    static CHAT: OnceLock<LocalChat> = OnceLock::new();
    let path = model_file(SMOLLM2_GGUF)?;
    Some(CHAT.get_or_init(|| LocalChat::new("smollm2-135m-instruct", path, options())))
}

/// Greedy tokens after `prompt`, with the generation's figures.
fn greedy(
    m: &LocalModel,
    prompt: &[u32],
    params: &GenParams,
) -> (Vec<u32>, docchat_inference::local::GenStats) {
    let mut out = Vec::new();
    let stats = m
        .generate(prompt, params, &|| false, &mut |id| {
            out.push(id);
            true
        })
        .unwrap();
    (out, stats)
}

const QUESTION: &str = "What is the capital of France? Answer in one sentence.";

#[test]
fn smollm2_tokenizer_matches_hugging_faces() {
    let Some(m) = smollm2() else {
        return;
    };
    let t = m.tokenizer();
    assert_eq!(t.vocab_size(), 49_152);
    assert_eq!(t.token_id("<|endoftext|>"), Some(0));
    assert_eq!(t.token_id("<|im_start|>"), Some(1));
    assert_eq!(t.token_id("<|im_end|>"), Some(2));
    assert_eq!(t.eos(), 2);
    assert!(t.start().is_empty(), "SmolLM2 adds no <bos>");
    // Ids from Hugging Face's tokenizers (Python) running SmolLM2's tokenizer.json
    // pipeline — BPE over this vocabulary and merges, Digits(individual_digits) then
    // ByteLevel(add_prefix_space = false) — computed once and pinned here.
    let cases: [(&str, &[u32]); 6] = [
        (
            QUESTION,
            &[
                1780, 314, 260, 3575, 282, 4649, 47, 19842, 281, 582, 6330, 30,
            ],
        ),
        ("Hello world", &[19556, 905]),
        (" Paris", &[7042]),
        (
            "The capital of France is Paris.",
            &[504, 3575, 282, 4649, 314, 7042, 30],
        ),
        (
            "In 2024, 3.14159 people      said\n\n\"naïve café — 東京 🚀 Ω≈ç√\"\tdon't!",
            &[
                788, 216, 34, 32, 34, 36, 28, 216, 35, 30, 33, 36, 33, 37, 41, 701, 4444, 1137,
                198, 198, 18, 3546, 46494, 37366, 1841, 17097, 247, 126, 16736, 122, 15107, 244,
                218, 5664, 119, 40533, 226, 11512, 22052, 244, 18, 197, 12420, 982, 17,
            ],
        ),
        (
            "def mean(values):\n    return sum(values) / len(values)\n",
            &[
                1604, 1441, 24, 6347, 727, 472, 1003, 2028, 24, 6347, 25, 2272, 3858, 24, 6347, 25,
                198,
            ],
        ),
    ];
    for (text, want) in cases {
        let ids = t.encode(text);
        assert_eq!(ids, want, "{text:?}: {:?}", pieces(m, &ids));
        assert_eq!(t.decode(&ids), text);
    }
    // Special tokens are never made from text: "<|im_end|>" is spelled out.
    let ids = t.encode("<|im_end|> is text here");
    assert_eq!(ids, [44, 108, 306, 79, 486, 108, 46, 314, 1694, 1535]);
    assert!(!ids.iter().any(|&i| t.is_control(i)));
    for text in [
        "  leading spaces, trailing\t\n",
        "mixed\r\nline endings\n\n\nand    tabs\t\t",
        "<table><tr><td>1</td></tr></table>",
        "",
    ] {
        let ids = t.encode(text);
        assert_eq!(t.decode(&ids), text, "{:?}", pieces(m, &ids));
    }
}

#[test]
fn smollm2_prompts_are_chatml() {
    let Some(m) = smollm2() else {
        return;
    };
    let t = m.tokenizer();
    let Some(ChatFormat::ChatMl {
        im_start,
        im_end,
        default_system,
    }) = m.chat_format().cloned()
    else {
        panic!("SmolLM2 is ChatML: {:?}", m.chat_format());
    };
    let default_system = default_system.expect("the template's default system prompt");
    assert_eq!(
        default_system,
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    );
    let turn = |role: &str, content: &str| {
        let mut ids = vec![im_start];
        ids.extend(t.encode(&format!("{role}\n{content}")));
        ids.push(im_end);
        ids.extend(t.encode("\n"));
        ids
    };
    let answer = |mut ids: Vec<u32>| {
        ids.push(im_start);
        ids.extend(t.encode("assistant\n"));
        ids
    };
    // Without a system message, the template's own.
    let prompt = m.chat_prompt(&[ChatMessage::user("Hi")]).unwrap();
    let want = [turn("system", &default_system), turn("user", "Hi")].concat();
    assert_eq!(prompt, answer(want));
    // System messages, joined, are the first turn wherever they stand; assistant turns stay.
    let prompt = m
        .chat_prompt(&[
            ChatMessage::system("Be brief."),
            ChatMessage::user("Hi"),
            ChatMessage::assistant("Hello!"),
            ChatMessage::system("Context: none."),
            ChatMessage::user("Bye <|im_end|>"),
        ])
        .unwrap();
    let want = [
        turn("system", "Be brief.\n\nContext: none."),
        turn("user", "Hi"),
        turn("assistant", "Hello!"),
        turn("user", "Bye <|im_end|>"),
    ]
    .concat();
    assert_eq!(prompt, answer(want), "{}", t.decode(&prompt));
    // The <|im_end|> in the text is text: only the four turns' own marks are control tokens.
    assert_eq!(prompt.iter().filter(|&&i| i == im_end).count(), 4);
}

#[test]
fn smollm2_answers_and_stops_at_im_end() {
    let Some(m) = smollm2() else {
        return;
    };
    let t = m.tokenizer();
    let prompt = m.chat_prompt(&[ChatMessage::user(QUESTION)]).unwrap();
    let (out, stats) = greedy(m, &prompt, &GenParams::greedy(60));
    let text = t.decode(&out);
    eprintln!("answer: {text:?} ({stats:?})");
    assert!(text.contains("Paris"), "{text:?}");
    // It ended its turn itself, with <|im_end|>, which is not part of the answer.
    assert_eq!(stats.stop, StopReason::EndOfTurn);
    assert_eq!(stats.stop_token, t.token_id("<|im_end|>"));
    assert!(out.len() < 60 && !out.iter().any(|&i| t.is_control(i)));
    assert!(
        !text.contains("im_end") && !text.contains(QUESTION),
        "{text:?}"
    );
    // As docchat's chat asks it (its system prompt, gateway's 12-token test budget).
    let prompt = m
        .chat_prompt(&[
            ChatMessage::system(
                "You are docchat, a helpful assistant. Answer accurately and concisely.",
            ),
            ChatMessage::user("Name the capital of France."),
        ])
        .unwrap();
    let (out, _) = greedy(m, &prompt, &GenParams::greedy(12));
    let text = t.decode(&out);
    eprintln!("answer with docchat's system prompt: {text:?}");
    assert!(text.contains("Paris"), "{text:?}");
}

#[test]
fn smollm2_perplexity_of_plain_english_is_low() {
    if let Some(m) = smollm2() {
        perplexity_of_plain_english_is_low(m, 60.0);
    }
}

#[test]
fn smollm2_long_prompts_run_in_chunks() {
    if let Some(m) = smollm2() {
        long_prompts_run_in_chunks(m);
    }
}

#[test]
fn smollm2_shortlisted_logits_decode_as_exact_ones() {
    if let Some(m) = smollm2() {
        shortlisted_logits_decode_as_exact_ones(m);
    }
}

#[test]
fn qwen_tokenizer_matches_hugging_faces() {
    let Some(m) = qwen() else {
        return;
    };
    let t = m.tokenizer();
    // The embedding's rows: 151 643 pieces, 22 added tokens, and padding.
    assert_eq!(t.vocab_size(), 151_936);
    assert_eq!(t.token_id("<|endoftext|>"), Some(151_643));
    assert_eq!(t.token_id("<|im_start|>"), Some(151_644));
    assert_eq!(t.token_id("<|im_end|>"), Some(151_645));
    assert_eq!(t.eos(), 151_645);
    for id in [151_643, 151_644, 151_645] {
        assert!(t.is_control(id), "{id}");
    }
    assert!(t.start().is_empty(), "Qwen2 adds no <bos>");
    // Ids from Hugging Face's tokenizers (Python, 0.23) running Qwen2's tokenizer.json
    // pipeline — NFC, Split(the qwen2 pattern, isolated), ByteLevel(add_prefix_space =
    // false, use_regex = false), BPE — over the vocabulary and merges read from this GGUF,
    // with its control and user-defined tokens added under their ids; computed once and
    // pinned here. Digits are single tokens; newlines stay with the punctuation before
    // them; contractions match in any case.
    let cases: [(&str, &[u32]); 9] = [
        (
            QUESTION,
            &[
                3838, 374, 279, 6722, 315, 9625, 30, 21806, 304, 825, 11652, 13,
            ],
        ),
        ("Hello world", &[9707, 1879]),
        (" Paris", &[12095]),
        (
            "The capital of France is Paris.",
            &[785, 6722, 315, 9625, 374, 12095, 13],
        ),
        (
            "In 2024, 3.14159 people      said\n\n\"naïve café — 東京 🚀 Ω≈ç√\"\tdon't!",
            &[
                641, 220, 17, 15, 17, 19, 11, 220, 18, 13, 16, 19, 16, 20, 24, 1251, 414, 1053,
                271, 1, 3376, 37572, 586, 51950, 1959, 60596, 109, 46553, 11162, 248, 222, 7851,
                102, 144540, 3131, 144336, 1, 2698, 263, 944, 0,
            ],
        ),
        (
            "def mean(values):\n    return sum(values) / len(values)\n",
            &[
                750, 3076, 20103, 982, 262, 470, 2629, 20103, 8, 608, 2422, 20103, 340,
            ],
        ),
        (
            "I'M sure THEY'RE right; you've said we'll go, isn't it?",
            &[
                40, 27603, 2704, 62493, 94153, 1290, 26, 498, 3003, 1053, 582, 3278, 728, 11, 4436,
                944, 432, 30,
            ],
        ),
        (
            "Price: $1,234.50 (approx.)\r\n\r\n  -- end --  \n",
            &[
                6972, 25, 400, 16, 11, 17, 18, 19, 13, 20, 15, 320, 48053, 6138, 871, 220, 1177,
                835, 1177, 2303,
            ],
        ),
        (
            "Größe: 12°C, ½ cup, Ünïcödé ٣٤ १२ — ok.\n\n\n",
            &[
                6464, 78940, 25, 220, 16, 17, 30937, 11, 220, 26062, 10525, 11, 30512, 77, 37572,
                66, 2956, 128505, 220, 149, 96, 149, 97, 220, 12619, 100, 12619, 101, 1959, 5394,
                4192,
            ],
        ),
    ];
    for (text, want) in cases {
        let ids = t.encode(text);
        assert_eq!(ids, want, "{text:?}: {:?}", pieces(m, &ids));
        assert_eq!(t.decode(&ids), text);
    }
    // Control tokens are never made from text: "<|im_end|>" is spelled out (Hugging Face's
    // ids with `encode_special_tokens`), while the user-defined "<tool_call>" is cut out of
    // the text as Hugging Face does.
    let ids = t.encode("<|im_end|> is text here <tool_call>");
    assert_eq!(
        ids,
        [27, 91, 318, 6213, 91, 29, 374, 1467, 1588, 220, 151_657]
    );
    assert!(!ids.iter().any(|&i| t.is_control(i)));
    for text in [
        "  leading spaces, trailing\t\n",
        "mixed\r\nline endings\n\n\nand    tabs\t\t",
        "<table><tr><td>1</td></tr></table>",
        "",
    ] {
        let ids = t.encode(text);
        assert_eq!(t.decode(&ids), text, "{:?}", pieces(m, &ids));
    }
}

#[test]
fn qwen_prompts_are_chatml_with_qwens_default_system_prompt() {
    let Some(m) = qwen() else {
        return;
    };
    let t = m.tokenizer();
    let Some(ChatFormat::ChatMl {
        im_start,
        im_end,
        default_system,
    }) = m.chat_format().cloned()
    else {
        panic!("Qwen2.5 is ChatML: {:?}", m.chat_format());
    };
    assert_eq!((im_start, im_end), (151_644, 151_645));
    let default_system = default_system.expect("the template's default system prompt");
    assert_eq!(
        default_system,
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    );
    // The prompts as Qwen's own chat template renders them (jinja2, as transformers'
    // `apply_chat_template(..., add_generation_prompt=True)` runs it), tokenized by Hugging
    // Face's tokenizers as above with the control tokens: without a system message the
    // template's own...
    let prompt = m.chat_prompt(&[ChatMessage::user(QUESTION)]).unwrap();
    let want = [
        151_644, 8948, 198, 2610, 525, 1207, 16948, 11, 3465, 553, 54364, 14817, 13, 1446, 525,
        264, 10950, 17847, 13, 151_645, 198, 151_644, 872, 198, 3838, 374, 279, 6722, 315, 9625,
        30, 21806, 304, 825, 11652, 13, 151_645, 198, 151_644, 77091, 198,
    ];
    assert_eq!(prompt, want, "{}", t.decode(&prompt));
    // ...and with one, and an earlier answer.
    let prompt = m
        .chat_prompt(&[
            ChatMessage::system("Be brief."),
            ChatMessage::user("Hi"),
            ChatMessage::assistant("Hello!"),
            ChatMessage::user("Bye"),
        ])
        .unwrap();
    let want = [
        151_644, 8948, 198, 3430, 9814, 13, 151_645, 198, 151_644, 872, 198, 13048, 151_645, 198,
        151_644, 77091, 198, 9707, 0, 151_645, 198, 151_644, 872, 198, 1359, 68, 151_645, 198,
        151_644, 77091, 198,
    ];
    assert_eq!(prompt, want, "{}", t.decode(&prompt));
}

#[test]
fn qwen_answers_and_stops_at_im_end() {
    let Some(m) = qwen() else {
        return;
    };
    let t = m.tokenizer();
    let prompt = m.chat_prompt(&[ChatMessage::user(QUESTION)]).unwrap();
    let (out, stats) = greedy(m, &prompt, &GenParams::greedy(60));
    let text = t.decode(&out);
    eprintln!("answer: {text:?} ({stats:?})");
    assert!(text.contains("Paris"), "{text:?}");
    // It ended its turn itself, with <|im_end|>, which is not part of the answer.
    assert_eq!(stats.stop, StopReason::EndOfTurn);
    assert_eq!(stats.stop_token, Some(151_645));
    assert!(out.len() < 60 && !out.iter().any(|&i| t.is_control(i)));
    assert!(!text.contains("im_end"), "{text:?}");
}

#[test]
fn qwen_perplexity_of_plain_english_is_low() {
    if let Some(m) = qwen() {
        perplexity_of_plain_english_is_low(m, QWEN_MOST_PERPLEXITY);
    }
}

/// Qwen2.5-Coder-0.5B's perplexity on the plain English text: 15.8 here, 15.7 by a float64
/// numpy forward pass of Hugging Face's Qwen2 over the same dequantized weights. Turning
/// Llama's interleaved rotary pairs instead of halves makes it 58 (the short answer is still
/// right then); leaving out the q/k/v biases, millions.
const QWEN_MOST_PERPLEXITY: f64 = 20.0;

#[test]
fn qwen_long_prompts_run_in_chunks() {
    if let Some(m) = qwen() {
        long_prompts_run_in_chunks(m);
    }
}

#[test]
fn qwen_shortlisted_logits_decode_as_exact_ones() {
    if let Some(m) = qwen() {
        shortlisted_logits_decode_as_exact_ones(m);
    }
}

#[test]
fn gemma_tokenizer_matches_the_vocabulary() {
    let Some(m) = gemma() else {
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
fn gemma_greedy_continuation_knows_the_capital_of_france() {
    let Some(m) = gemma() else {
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
fn gemma_perplexity_of_plain_english_is_low() {
    if let Some(m) = gemma() {
        perplexity_of_plain_english_is_low(m, 100.0);
    }
}

fn perplexity_of_plain_english_is_low(m: &LocalModel, most: f64) {
    let t = m.tokenizer();
    let text = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks were striking thirteen. Water boils at one hundred degrees Celsius at sea level.";
    let mut ids = t.start();
    let first = ids.len();
    ids.extend(t.encode(text));
    let nll = m.mean_nll(&ids).unwrap();
    let ppl = nll.exp();
    eprintln!("perplexity {ppl:.1} over {} tokens", ids.len() - 1);
    assert!(ppl < most, "perplexity {ppl}");
    // A scrambled text is far less likely: the model reads its input.
    let mut scrambled = ids.clone();
    scrambled[first..].reverse();
    assert!(m.mean_nll(&scrambled).unwrap() > nll + 1.0);
}

#[test]
fn gemma_long_prompts_run_in_chunks_over_the_window() {
    // Longer than Gemma's sliding window (512) too: the second chunk must see the first
    // through the cache, within the window.
    if let Some(m) = gemma() {
        long_prompts_run_in_chunks(m);
    }
}

/// A prompt longer than one batched pass (512 tokens): the second chunk must see the first
/// through the cache.
fn long_prompts_run_in_chunks(m: &LocalModel) {
    let t = m.tokenizer();
    let para = "Rivers carry water from the mountains to the sea, shaping valleys and plains along the way. ";
    let mut prompt = t.start();
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
fn gemma_shortlisted_logits_decode_as_exact_ones() {
    if let Some(m) = gemma() {
        shortlisted_logits_decode_as_exact_ones(m);
    }
}

fn shortlisted_logits_decode_as_exact_ones(m: &LocalModel) {
    let t = m.tokenizer();
    let mut prompt = t.start();
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
    let messages = [ChatMessage::user(QUESTION)];
    let done = chat.complete(&messages, 40, 0.0).await.unwrap();
    let (streamed, usage) = collect(chat, &messages, 40).await;
    eprintln!("answer: {:?} usage {usage:?}", done.text);
    // The check: standalone, with no system message, the built-in model answers.
    assert!(done.text.contains("Paris"), "{:?}", done.text);
    assert_eq!(done.finish_reason, "stop");
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

/// A models dir holding (links to) the fetched files `relative` names, laid out as
/// `scripts/fetch-models.sh` lays them out; None when one of them is missing.
fn models_dir_with(relative: &[&str]) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    for r in relative {
        let file = model_file(r)?;
        let link = dir.path().join(r);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(file, link).unwrap();
    }
    Some(dir)
}

#[tokio::test]
async fn registry_offers_the_instruct_model_and_never_the_base_one() {
    // A models dir with both (and nothing else the real one may hold); only the
    // instruction-tuned one is a chat model.
    let Some(dir) = models_dir_with(&[SMOLLM2_GGUF, GEMMA_GGUF]) else {
        return;
    };
    let models_dir = || dir.path().to_owned();
    let found = find_local_models(&models_dir(), 8192);
    let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["smollm2-135m-instruct"], "{found:?}");
    let entry = &found[0];
    assert_eq!(entry.provider, "local");
    assert_eq!(entry.base_model(), "HuggingFaceTB/SmolLM2-135M-Instruct");
    assert_eq!(entry.display_name(), "SmolLM2-135M-Instruct");
    assert_eq!(entry.context_length, 8192);
    assert_eq!(
        find_local_models(&models_dir(), 2048)[0].context_length,
        2048
    );
    assert_eq!((entry.input_price, entry.output_price), (0.0, 0.0));
    let registry = Registry::default().with_models(find_local_models(&models_dir(), 8192));
    let resolved = registry.resolve("auto").unwrap();
    assert_eq!(resolved.name, "smollm2-135m-instruct");
    assert!(registry.resolve("gemma-3-270m").is_none());
    let model = ChatModel::from_entry(resolved, &options()).unwrap();
    assert_eq!(model.name(), "smollm2-135m-instruct");
    assert!(matches!(model, ChatModel::Local(_)));
    // A configured upstream keeps its place as the default.
    let file = "[[models]]\nname = \"up\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let registry = Registry::parse(file)
        .unwrap()
        .with_models(find_local_models(&models_dir(), 8192));
    assert_eq!(registry.resolve("auto").unwrap().name, "up");
    assert_eq!(registry.chat_models().count(), 2);
    // The base Gemma alone is not offered either: a dir with only it has no chat model.
    let dir = tempfile::tempdir().unwrap();
    let gemma = model_file(GEMMA_GGUF).unwrap();
    std::fs::create_dir(dir.path().join("gemma3-270m")).unwrap();
    std::os::unix::fs::symlink(&gemma, dir.path().join("gemma3-270m/gemma.gguf")).unwrap();
    assert!(find_local_models(dir.path(), 8192).is_empty());
}

#[tokio::test]
async fn registry_offers_qwen_as_an_instruct_model() {
    let Some(dir) = models_dir_with(&[QWEN_GGUF]) else {
        return;
    };
    // Named from the metadata (base name "Qwen2.5-Coder", size "0.5B", fine-tune
    // "Instruct-AWQ"), under Qwen's organization, which the file does not state.
    let found = find_local_models(dir.path(), 65_536);
    let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["qwen2.5-coder-0.5b-instruct"], "{found:?}");
    let entry = &found[0];
    assert_eq!(entry.provider, "local");
    assert_eq!(entry.base_model(), "Qwen/Qwen2.5-Coder-0.5B-Instruct");
    assert_eq!(entry.display_name(), "Qwen2.5-Coder-0.5B-Instruct");
    // Its trained context (qwen2.context_length), under the cap.
    assert_eq!(entry.context_length, 32_768);
    assert_eq!(find_local_models(dir.path(), 8192)[0].context_length, 8192);
    assert_eq!((entry.input_price, entry.output_price), (0.0, 0.0));
    let registry = Registry::default().with_models(found.clone());
    assert_eq!(
        registry.resolve("auto").unwrap().name,
        "qwen2.5-coder-0.5b-instruct"
    );
    let model = ChatModel::from_entry(entry, &options()).unwrap();
    assert!(matches!(model, ChatModel::Local(_)));
    // Beside the built-in model, both are offered.
    let Some(both) = models_dir_with(&[SMOLLM2_GGUF, QWEN_GGUF]) else {
        return;
    };
    let mut names: Vec<String> = find_local_models(both.path(), 8192)
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"]
    );
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
