//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`), as Hugging Face's `tokenizers` runs
//! SmolLM2's and Qwen2's `tokenizer.json` and llama.cpp their GGUF:
//!
//! 1. pre-tokenization splits the text into words, by a pattern that the pre-tokenizer
//!    (`tokenizer.ggml.pre`) chooses ([`PreTokenizer`]):
//!    - GPT-2's, `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;
//!      SmolLM2 (`"smollm"`, also StarCoder's) first isolates every digit (`Digits` with
//!      `individual_digits`), then applies it to each piece;
//!    - Qwen2's (`"qwen2"`, llama.cpp's `LLAMA_VOCAB_PRE_TYPE_QWEN2`, the `Split` of Qwen2's
//!      `tokenizer.json`): contractions in any case, a letter run with at most one
//!      non-letter, non-digit, non-newline character before it, single digits (no separate
//!      digit split), punctuation runs with the newlines after them, newline runs with the
//!      spaces before them, then GPT-2's treatment of spaces. Qwen2's `tokenizer.json` also
//!      normalizes the text to NFC first; this does not (nor does llama.cpp), which only
//!      matters for text in decomposed form;
//! 2. each word's UTF-8 bytes become GPT-2's printable stand-ins (`byte_to_unicode`: a
//!    space is `Ġ`, a newline `Ċ`), so every byte is a vocabulary piece;
//! 3. adjacent pieces are merged, always the pair listed earliest in
//!    `tokenizer.ggml.merges` (the leftmost of equal pairs), until no listed pair is left.
//!
//! Decoding maps a piece's characters back to the bytes they stand for.

use std::collections::HashMap;

use fancy_regex::Regex;

use super::LocalError;
use super::gguf::{Gguf, Value};

/// GPT-2's pre-tokenizer pattern (Hugging Face's `ByteLevel` with `use_regex`).
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Qwen2's pre-tokenizer pattern (its `tokenizer.json`'s `Split`, llama.cpp's `QWEN2`).
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How a pre-tokenizer (`tokenizer.ggml.pre`) splits text into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreTokenizer {
    /// The pattern whose matches are the words.
    pattern: &'static str,
    /// Digits are words of their own before the pattern runs.
    split_digits: bool,
}

impl PreTokenizer {
    /// The pre-tokenizer of `tokenizer.ggml.pre`, if it is one of those known here.
    pub(crate) fn named(pre: &str) -> Option<PreTokenizer> {
        let (pattern, split_digits) = match pre {
            "gpt-2" | "gpt2" => (GPT2_PATTERN, false),
            "smollm" | "starcoder" | "refact" | "codeshell" => (GPT2_PATTERN, true),
            "qwen2" => (QWEN2_PATTERN, false),
            _ => return None,
        };
        Some(PreTokenizer {
            pattern,
            split_digits,
        })
    }
}

/// A byte-level BPE: the merge ranks and the pre-tokenizer.
pub(crate) struct Bpe {
    /// Rank of each merge by the ids of its two sides.
    ranks: HashMap<(u32, u32), u32>,
    pattern: Regex,
    /// Digits are words of their own before the pattern runs.
    split_digits: bool,
}

impl Bpe {
    /// The merges of `g`, whose sides are looked up in `vocab` (the normal pieces by text).
    pub(crate) fn from_gguf(g: &Gguf, vocab: &HashMap<String, u32>) -> Result<Bpe, LocalError> {
        let pre = g.string("tokenizer.ggml.pre").unwrap_or("gpt-2");
        let pre = PreTokenizer::named(pre).ok_or_else(|| {
            g.bad(format!(
                "pre-tokenizer {pre:?} is not supported (gpt-2, smollm, starcoder, qwen2)"
            ))
        })?;
        let merges = match g.get("tokenizer.ggml.merges") {
            Some(Value::Strings(m)) => m,
            _ => return Err(g.bad("tokenizer.ggml.merges is missing")),
        };
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, merge) in merges.iter().enumerate() {
            let (a, b) = merge
                .split_once(' ')
                .ok_or_else(|| g.bad(format!("merge {merge:?} is not two pieces")))?;
            // A merge whose sides are not pieces can never apply.
            if let (Some(&a), Some(&b)) = (vocab.get(a), vocab.get(b)) {
                ranks.entry((a, b)).or_insert(rank as u32);
            }
        }
        let pattern =
            Regex::new(pre.pattern).map_err(|e| g.bad(format!("pre-tokenizer pattern: {e}")))?;
        Ok(Bpe {
            ranks,
            pattern,
            split_digits: pre.split_digits,
        })
    }

    /// The words of `text`, each already in byte-level characters.
    pub(crate) fn words(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut split = |piece: &str| {
            let mut at = 0;
            for m in self.pattern.find_iter(piece) {
                // The pattern matches any character, so a match failure (the backtracking
                // limit) is the only way to stop early: the rest is then one word.
                let Ok(m) = m else { break };
                words.push(to_unicode(&piece[m.start()..m.end()]));
                at = m.end();
            }
            if at < piece.len() {
                words.push(to_unicode(&piece[at..]));
            }
        };
        if !self.split_digits {
            split(text);
            return words;
        }
        let mut run = 0;
        for (i, c) in text.char_indices() {
            if c.is_numeric() {
                if run < i {
                    split(&text[run..i]);
                }
                split(&text[i..i + c.len_utf8()]);
                run = i + c.len_utf8();
            }
        }
        if run < text.len() {
            split(&text[run..]);
        }
        words
    }

    /// The priority of merging pieces `a` and `b` (higher first), if they merge.
    pub(crate) fn rank(&self, vocab: &HashMap<String, u32>, a: &str, b: &str) -> Option<f32> {
        let (a, b) = (vocab.get(a)?, vocab.get(b)?);
        self.ranks.get(&(*a, *b)).map(|&r| -(r as f32))
    }
}

/// GPT-2's stand-in for byte `b`: printable Latin-1 bytes stand for themselves, the other 68
/// (controls, space, DEL, NBSP, soft hyphen) for U+0100 onwards, in byte order.
pub(crate) fn byte_char(b: u8) -> char {
    let code = match b {
        0..=32 => 256 + u32::from(b),
        127..=160 => 256 + 33 + u32::from(b - 127),
        173 => 256 + 67,
        _ => u32::from(b),
    };
    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The byte `c` stands for, if it is one of GPT-2's stand-ins.
pub(crate) fn char_byte(c: char) -> Option<u8> {
    let code = u32::from(c);
    let b = match code {
        256..=288 => code - 256,
        289..=322 => code - 289 + 127,
        323 => 173,
        33..=126 | 161..=172 | 174..=255 => code,
        _ => return None,
    };
    u8::try_from(b).ok()
}

fn to_unicode(word: &str) -> String {
    word.bytes().map(byte_char).collect()
}

/// The bytes a byte-level piece stands for (a character that is no stand-in as its UTF-8).
pub(crate) fn piece_bytes(piece: &str, out: &mut Vec<u8>) {
    for c in piece.chars() {
        match char_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of `text` by pre-tokenizer `pre`, as text.
    fn words(pre: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::named(pre).unwrap();
        let bpe = Bpe {
            ranks: HashMap::new(),
            pattern: Regex::new(pre.pattern).unwrap(),
            split_digits: pre.split_digits,
        };
        bpe.words(text)
            .iter()
            .map(|w| {
                let mut b = Vec::new();
                piece_bytes(w, &mut b);
                String::from_utf8(b).unwrap()
            })
            .collect()
    }

    #[test]
    fn byte_map_is_gpt2s() {
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(b'\t'), 'ĉ');
        assert_eq!(byte_char(0), 'Ā');
        assert_eq!(byte_char(127), 'ġ');
        assert_eq!(byte_char(160), 'ł');
        assert_eq!(byte_char(173), 'Ń');
        assert_eq!(byte_char(b'a'), 'a');
        assert_eq!(byte_char(0xe9), 'é');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_char(b);
            assert!(seen.insert(c), "{b} maps to a taken character");
            assert_eq!(char_byte(c), Some(b), "{b}");
        }
        assert_eq!(char_byte('Ŕ'), None);
        let mut out = Vec::new();
        piece_bytes("ĠcafÃ©", &mut out);
        assert_eq!(out, " café".as_bytes());
    }

    #[test]
    fn words_follow_the_gpt2_pattern() {
        let plain = |t: &str| words("gpt-2", t);
        assert_eq!(plain("Hello world!"), ["Hello", " world", "!"]);
        assert_eq!(plain("I'm here"), ["I", "'m", " here"]);
        // A run of spaces leaves its last one to the next word.
        assert_eq!(plain("a   b"), ["a", "  ", " b"]);
        assert_eq!(plain("end  \n"), ["end", "  \n"]);
        assert_eq!(plain("year 2024."), ["year", " 2024", "."]);
        assert_eq!(plain("naïve 東京"), ["naïve", " 東京"]);
        // SmolLM2's digits are words of their own.
        assert_eq!(
            words("smollm", "year 2024."),
            ["year", " ", "2", "0", "2", "4", "."]
        );
        assert_eq!(words("gpt2", "year 2024."), ["year", " 2024", "."]);
        assert!(PreTokenizer::named("llama-bpe").is_none());
    }

    #[test]
    fn words_follow_qwen2s_pattern() {
        let w = |t: &str| words("qwen2", t);
        // Digits one at a time, the space before them a word of its own.
        assert_eq!(w("year 2024."), ["year", " ", "2", "0", "2", "4", "."]);
        // Contractions in any case.
        assert_eq!(
            w("I'M here, don't"),
            ["I", "'M", " here", ",", " don", "'t"]
        );
        // One non-letter, non-digit character (not a newline) joins the letters after it.
        assert_eq!(w("(hello)\tworld"), ["(hello", ")", "\tworld"]);
        assert_eq!(w("$100 x=y"), ["$", "1", "0", "0", " x", "=y"]);
        // Punctuation keeps the newlines after it; newlines take the spaces before them.
        assert_eq!(w("end.\n\nNext"), ["end", ".\n\n", "Next"]);
        assert_eq!(w("a  \n b"), ["a", "  \n", " b"]);
        // Runs of spaces leave their last one to the next word, as GPT-2's.
        assert_eq!(w("a   b"), ["a", "  ", " b"]);
        assert_eq!(w("naïve 東京"), ["naïve", " 東京"]);
        assert_eq!(w("x\r\n"), ["x", "\r\n"]);
    }
}
