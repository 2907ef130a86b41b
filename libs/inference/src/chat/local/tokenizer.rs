//! The tokenizers of GGUF files, built from `tokenizer.ggml.tokens` and `token_type`:
//!
//! - SentencePiece BPE (`tokenizer.ggml.model = "llama"`, Gemma), with the pieces' `scores`,
//!   encoding as llama.cpp's SPM tokenizer does:
//!   1. user-defined pieces (Gemma: runs of spaces, tabs and newlines, a few HTML tags) are
//!      cut out of the raw text first and become their own tokens;
//!   2. in the rest, spaces become `▁` (no space is prepended: `add_space_prefix` is false
//!      for Gemma 3), the text is split into characters, and the adjacent pair whose joined
//!      text is a vocabulary piece with the highest score is merged, again and again;
//!   3. a character left that is not a piece is spelled with byte tokens `<0xNN>`.
//! - Byte-level BPE (`"gpt2"`, SmolLM2 and Qwen2), with `tokenizer.ggml.merges`: see
//!   [`bpe`](super::bpe).
//!
//! Control tokens (`<bos>`, `<start_of_turn>`, `<|im_end|>`, ...) are never produced from
//! text: callers add them by id, so a document that contains `<end_of_turn>` or
//! `<|im_end|>` cannot end a turn.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::LocalError;
use super::bpe::Bpe;
use super::gguf::{Gguf, Value};

/// The SentencePiece word-boundary mark.
const SPACE: char = '\u{2581}';

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte(u8),
}

/// How plain text (between user-defined pieces) becomes tokens.
enum Encoder {
    SentencePiece {
        scores: Vec<f32>,
        /// Byte tokens by byte value.
        bytes: Box<[Option<u32>; 256]>,
    },
    ByteLevel(Bpe),
}

/// A tokenizer read from GGUF metadata.
pub struct Tokenizer {
    pieces: Vec<String>,
    kinds: Vec<Kind>,
    /// Normal pieces by text.
    normal: HashMap<String, u32>,
    /// User-defined pieces, longest first.
    user_defined: Vec<(String, u32)>,
    encoder: Encoder,
    unknown: u32,
    bos: u32,
    eos: u32,
    add_bos: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.pieces.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

impl Tokenizer {
    pub(crate) fn from_gguf(g: &Gguf) -> Result<Tokenizer, LocalError> {
        let model = g.string("tokenizer.ggml.model").unwrap_or("llama");
        let pieces = match g.get("tokenizer.ggml.tokens") {
            Some(Value::Strings(t)) => t.clone(),
            _ => return Err(g.bad("tokenizer.ggml.tokens is missing")),
        };
        let n = pieces.len();
        let types: Vec<i64> = match g.get("tokenizer.ggml.token_type") {
            Some(Value::Numbers(t)) if t.len() == n => t.iter().map(|&v| v as i64).collect(),
            _ => vec![1; n],
        };
        let mut kinds = Vec::with_capacity(n);
        let mut normal = HashMap::with_capacity(n);
        let mut bytes = [None; 256];
        let mut user_defined = Vec::new();
        for (id, (piece, &ty)) in pieces.iter().zip(&types).enumerate() {
            let id = id as u32;
            let kind = match ty {
                2 => Kind::Unknown,
                3 => Kind::Control,
                4 => Kind::UserDefined,
                5 => Kind::Unused,
                6 => match parse_byte(piece) {
                    Some(b) => Kind::Byte(b),
                    None => return Err(g.bad(format!("byte token {piece:?} is malformed"))),
                },
                _ => Kind::Normal,
            };
            match kind {
                Kind::Normal => {
                    normal.entry(piece.clone()).or_insert(id);
                }
                Kind::Byte(b) => bytes[usize::from(b)] = Some(id),
                Kind::UserDefined if !piece.is_empty() => user_defined.push((piece.clone(), id)),
                _ => {}
            }
            kinds.push(kind);
        }
        user_defined.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        let encoder = match model {
            "llama" => Encoder::SentencePiece {
                scores: match g.get("tokenizer.ggml.scores") {
                    Some(Value::Numbers(s)) if s.len() == n => {
                        s.iter().map(|&v| v as f32).collect()
                    }
                    _ => vec![0.0; n],
                },
                bytes: Box::new(bytes),
            },
            "gpt2" => Encoder::ByteLevel(Bpe::from_gguf(g, &normal)?),
            _ => {
                return Err(g.bad(format!(
                    "tokenizer model {model:?} is not supported (SentencePiece \"llama\", byte-level BPE \"gpt2\")"
                )));
            }
        };
        let id = |key: &str, default: u32| {
            g.get(key)
                .and_then(Value::as_u64)
                .map_or(default, |v| v as u32)
        };
        Ok(Tokenizer {
            unknown: id("tokenizer.ggml.unknown_token_id", 0),
            bos: id("tokenizer.ggml.bos_token_id", 1),
            eos: id("tokenizer.ggml.eos_token_id", 2),
            add_bos: g
                .get("tokenizer.ggml.add_bos_token")
                .and_then(Value::as_u64)
                .is_none_or(|v| v != 0),
            pieces,
            kinds,
            normal,
            user_defined,
            encoder,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> u32 {
        self.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// The tokens a sequence starts with: `[bos]` when the file says to add it
    /// (`tokenizer.ggml.add_bos_token`, true when unsaid; Gemma does, SmolLM2 does not).
    pub fn start(&self) -> Vec<u32> {
        if self.add_bos {
            vec![self.bos]
        } else {
            Vec::new()
        }
    }

    /// The id of a piece of any kind (e.g. `<end_of_turn>`), if the vocabulary has it.
    pub fn token_id(&self, piece: &str) -> Option<u32> {
        self.pieces
            .iter()
            .position(|p| p == piece)
            .map(|i| i as u32)
    }

    /// The piece of `id` as the vocabulary spells it.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// Whether `id` is a control token (not text).
    pub fn is_control(&self, id: u32) -> bool {
        matches!(
            self.kinds.get(id as usize),
            Some(Kind::Control | Kind::Unknown | Kind::Unused)
        )
    }

    /// Token ids of `text`, without any special token.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut rest = text;
        let mut plain_start = 0;
        let mut i = 0;
        // Cut user-defined pieces out (longest match at each position), encode the text
        // between them.
        while i < rest.len() {
            let tail = &rest[i..];
            match self
                .user_defined
                .iter()
                .find(|(p, _)| tail.starts_with(p.as_str()))
            {
                Some((p, id)) => {
                    self.encode_plain(&rest[plain_start..i], &mut out);
                    out.push(*id);
                    rest = &rest[i + p.len()..];
                    i = 0;
                    plain_start = 0;
                }
                None => {
                    i += tail.chars().next().map_or(1, char::len_utf8);
                }
            }
        }
        self.encode_plain(&rest[plain_start..], &mut out);
        out
    }

    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        match &self.encoder {
            Encoder::SentencePiece { scores, bytes } => {
                let text: String = text
                    .chars()
                    .map(|c| if c == ' ' { SPACE } else { c })
                    .collect();
                let pieces = merge(&text, |_, _, joined| {
                    self.normal.get(joined).map(|&id| scores[id as usize])
                });
                for piece in pieces {
                    match self.normal.get(piece) {
                        Some(&id) => out.push(id),
                        None => {
                            for b in piece.bytes() {
                                out.push(bytes[usize::from(b)].unwrap_or(self.unknown));
                            }
                        }
                    }
                }
            }
            Encoder::ByteLevel(bpe) => {
                for word in bpe.words(text) {
                    let pieces = merge(&word, |a, b, _| bpe.rank(&self.normal, a, b));
                    out.extend(
                        pieces
                            .into_iter()
                            .map(|p| self.normal.get(p).copied().unwrap_or(self.unknown)),
                    );
                }
            }
        }
    }

    /// The bytes `id` stands for in text: pieces as their text (SentencePiece's `▁` as a
    /// space, a byte-level piece's characters as the bytes they stand for), byte tokens as
    /// their byte, nothing for control tokens.
    pub fn token_bytes(&self, id: u32, out: &mut Vec<u8>) {
        let Some(piece) = self.pieces.get(id as usize) else {
            return;
        };
        match (self.kinds[id as usize], &self.encoder) {
            (Kind::Byte(b), _) => out.push(b),
            (Kind::Control | Kind::Unknown | Kind::Unused, _) => {}
            (Kind::Normal, Encoder::ByteLevel(_)) => super::bpe::piece_bytes(piece, out),
            (Kind::Normal | Kind::UserDefined, _) => {
                for c in piece.chars() {
                    if c == SPACE {
                        out.push(b' ');
                    } else {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
        }
    }

    /// The text of `ids` (invalid UTF-8 from stray byte tokens replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            self.token_bytes(id, &mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Merges adjacent symbols of `text` (at first its characters), always the pair that
/// `score(left, right, joined)` scores highest (the leftmost of equals), until no pair
/// scores; returns the symbols left.
fn merge(text: &str, score: impl Fn(&str, &str, &str) -> Option<f32>) -> Vec<&str> {
    // Symbols as byte ranges into `text`, linked so merges are O(1).
    let mut sym: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, c) in text.char_indices() {
        let k = sym.len();
        sym.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: k.checked_sub(1),
            next: Some(k + 1),
        });
    }
    if let Some(last) = sym.last_mut() {
        last.next = None;
    }
    let push = |sym: &[Symbol], left: usize, right: usize, heap: &mut BinaryHeap<Pair>| {
        let (a, b) = (&sym[left], &sym[right]);
        let (l, r) = (
            &text[a.start..a.start + a.len],
            &text[b.start..b.start + b.len],
        );
        let joined = &text[a.start..b.start + b.len];
        if let Some(score) = score(l, r, joined) {
            heap.push(Pair {
                score,
                left,
                right,
                len: joined.len(),
            });
        }
    };
    let mut heap = BinaryHeap::new();
    for left in 0..sym.len().saturating_sub(1) {
        push(&sym, left, left + 1, &mut heap);
    }
    while let Some(pair) = heap.pop() {
        let (l, r) = (pair.left, pair.right);
        // Stale entries: one side has changed since the pair was queued.
        if sym[l].len == 0 || sym[r].len == 0 || sym[l].len + sym[r].len != pair.len {
            continue;
        }
        sym[l].len += sym[r].len;
        sym[r].len = 0;
        sym[l].next = sym[r].next;
        if let Some(n) = sym[r].next {
            sym[n].prev = Some(l);
        }
        if let Some(p) = sym[l].prev {
            push(&sym, p, l, &mut heap);
        }
        if let Some(n) = sym[l].next {
            push(&sym, l, n, &mut heap);
        }
    }
    let mut pieces = Vec::new();
    let mut at = if sym.is_empty() { None } else { Some(0) };
    while let Some(k) = at {
        let s = &sym[k];
        pieces.push(&text[s.start..s.start + s.len]);
        at = s.next;
    }
    pieces
}

fn parse_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

struct Symbol {
    start: usize,
    /// 0 once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge: highest score first, then leftmost.
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Splits `bytes` into the longest valid UTF-8 prefix and an incomplete tail (at most three
/// bytes that may still become a character); invalid bytes in the middle are replaced.
pub(crate) fn take_utf8(bytes: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => bytes.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let split = bytes.len() - keep;
    let tail = bytes.split_off(split);
    let text = String::from_utf8_lossy(bytes).into_owned();
    *bytes = tail;
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_utf8_holds_back_partial_characters() {
        let mut b = "é".as_bytes()[..1].to_vec();
        assert_eq!(take_utf8(&mut b), "");
        b.extend_from_slice(&"é".as_bytes()[1..]);
        b.extend_from_slice(b"x");
        assert_eq!(take_utf8(&mut b), "éx");
        assert!(b.is_empty());
        let mut bad = vec![0xff, b'a'];
        assert_eq!(take_utf8(&mut bad), "\u{fffd}a");
    }
}
