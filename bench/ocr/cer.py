#!/usr/bin/env python3
"""Character (and word) error rate of an OCR hypothesis against a reference text.

Why: one number per page and per set that any OCR path (docchat's, plain Tesseract, a later
engine) is scored by, with the same normalization, so their figures compare.

Normalization (both texts, before comparing): Unicode NFKC (ligatures such as "ﬁ" become
"fi", full-width forms and compatibility characters fold), every run of whitespace (spaces,
newlines, page feeds) becomes one space, leading and trailing space is stripped. Case and
punctuation are kept: "Utility" against "utility" and "‘x’" against "'x'" are errors.

CER = Levenshtein distance (insertions, deletions, substitutions of one code point, each
costing 1) between the normalized hypothesis and reference, divided by the normalized
reference's length. It can exceed 1 (a hypothesis much longer than the reference). WER is
the same over whitespace-separated words. A set's CER is the sum of its pages' edits over
the sum of their reference lengths (long pages weigh more), not the mean of page CERs.

The distance comes from rapidfuzz (pinned in tests/requirements.txt) when importable, else
from the pure-Python row-by-row dynamic programme below (same result, much slower).

Usage: cer.py HYPOTHESIS_FILE REFERENCE_FILE   prints CER, WER and the counts
"""

import sys
import unicodedata
from dataclasses import dataclass

try:
    from rapidfuzz.distance import Levenshtein as _rf
except ImportError:  # pragma: no cover - the venv has it
    _rf = None


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _levenshtein_py(a, b) -> int:
    """Edit distance of two sequences (str or list), O(len(a)*len(b)) time, O(len(b)) memory."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        cur = [i]
        for j, y in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def levenshtein(a, b) -> int:
    return _rf.distance(a, b) if _rf is not None else _levenshtein_py(a, b)


@dataclass
class Score:
    """Edits and reference lengths, summed over pages (characters and words)."""

    char_edits: int = 0
    chars: int = 0
    word_edits: int = 0
    words: int = 0
    pages: int = 0

    def add(self, other: "Score") -> "Score":
        self.char_edits += other.char_edits
        self.chars += other.chars
        self.word_edits += other.word_edits
        self.words += other.words
        self.pages += other.pages
        return self

    @property
    def cer(self) -> float:
        return self.char_edits / self.chars if self.chars else float(self.char_edits > 0)

    @property
    def wer(self) -> float:
        return self.word_edits / self.words if self.words else float(self.word_edits > 0)


def score(hypothesis: str, reference: str) -> Score:
    """One page's Score (pages=1)."""
    h, r = normalize(hypothesis), normalize(reference)
    hw, rw = h.split(), r.split()
    return Score(levenshtein(h, r), len(r), levenshtein(hw, rw), len(rw), 1)


def cer(hypothesis: str, reference: str) -> float:
    return score(hypothesis, reference).cer


def wer(hypothesis: str, reference: str) -> float:
    return score(hypothesis, reference).wer


def _selftest():
    assert normalize(" ﬁle\n\n  two\tthree\f") == "file two three"
    for a, b, d in [("", "", 0), ("abc", "", 3), ("kitten", "sitting", 3), ("flaw", "lawn", 2)]:
        assert _levenshtein_py(a, b) == d == levenshtein(a, b), (a, b)
    assert _levenshtein_py("a b c".split(), "a x c d".split()) == 2 == levenshtein("a b c".split(), "a x c d".split())
    s = score("The  quick brown\nfox", "The quick brown fox.")
    assert (s.char_edits, s.chars, s.word_edits, s.words) == (1, 20, 1, 4), s


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--selftest":
        _selftest()
        print("ok")
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as h, open(sys.argv[2], encoding="utf-8") as r:
        s = score(h.read(), r.read())
    print(f"CER {s.cer:.4f} ({s.char_edits} edits / {s.chars} chars)  "
          f"WER {s.wer:.4f} ({s.word_edits} edits / {s.words} words)")


if __name__ == "__main__":
    main()
