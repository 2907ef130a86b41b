#!/usr/bin/env python3
"""Checks a question set of the retrieval-quality benchmark against its fetched corpus.

For every question: the fields are there and well formed (ids unique; `history`, when
present, a list of earlier questions); the document is in the set's manifest and its
format matches; `page` is a page of the PDF (null for other formats); and at least one of
the `answers` occurs in the gold page's text (PDF: `pdftotext -layout` of that page; HTML:
the text without tags; other formats: the file), compared case-insensitively with
whitespace collapsed and Unicode compatibility forms folded (NFKC: pdftotext keeps the
ligatures ﬁ, ﬂ). Unanswerable questions (`"unanswerable": true`) must name no document, no
page and no answers.

Usage: check_questions.py [SET ...] [--cache DIR]
  SET      dev, test (corpus.tsv) or second (corpus2.tsv); default: second
  --cache  where fetch.py put the corpora (default ~/.cache/docchat/quality)
Needs pdftotext (poppler-utils) and the fetched corpus (fetch.py [--corpus corpus2.tsv]).
Exits 1 when a question fails.
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFESTS = {"dev": "corpus.tsv", "test": "corpus.tsv", "second": "corpus2.tsv"}
FORMATS = ("pdf", "html", "md", "txt")
# Known exceptions: question id -> why its answer is not on its gold page.
EXCEPTIONS = {
    "q045": "the release date stands on page 1 of LaTeX News 35, the gold page is 3 (README.md)",
}


def normalized(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def read_manifest(name: str) -> dict[str, str]:
    """document name -> format"""
    out = {}
    for line in (HERE / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            cols = line.split("\t")
            out[cols[0]] = cols[1]
    return out


def html_text(raw: str) -> str:
    raw = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", raw)
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


class Texts:
    def __init__(self, folder: Path):
        self.folder = folder
        self.cache: dict[tuple[str, int | None], str] = {}
        self.pages: dict[str, int] = {}

    def page_count(self, doc: str) -> int:
        if doc not in self.pages:
            info = subprocess.run(["pdfinfo", str(self.folder / doc)], capture_output=True, text=True).stdout
            m = re.search(r"^Pages:\s+(\d+)", info, re.M)
            self.pages[doc] = int(m.group(1)) if m else 0
        return self.pages[doc]

    def text(self, doc: str, page: int | None) -> str:
        key = (doc, page)
        if key not in self.cache:
            path = self.folder / doc
            if doc.endswith(".pdf"):
                out = subprocess.run(["pdftotext", "-layout", "-f", str(page), "-l", str(page), str(path), "-"],
                                     capture_output=True, text=True)
                t = out.stdout
            elif doc.endswith(".html"):
                t = html_text(path.read_text(errors="replace"))
            else:
                t = path.read_text(errors="replace")
            self.cache[key] = normalized(t)
        return self.cache[key]


def check(set_name: str, cache: Path) -> tuple[int, int, list[str]]:
    manifest_name = MANIFESTS[set_name]
    formats = read_manifest(manifest_name)
    folder = cache / Path(manifest_name).stem
    missing = [d for d in formats if not (folder / d).exists()]
    if missing:
        sys.exit(f"{len(missing)} documents missing in {folder} (run fetch.py --corpus {manifest_name}): {missing[:5]}")
    texts = Texts(folder)
    problems, ids, n, excused = [], set(), 0, 0
    for lineno, line in enumerate((HERE / "questions" / f"{set_name}.jsonl").read_text().splitlines(), 1):
        if not line.strip():
            continue
        n += 1
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{set_name}.jsonl:{lineno}: not JSON ({e})")
            continue
        qid = q.get("id", f"line {lineno}")

        def bad(msg):
            problems.append(f"{qid}: {msg}")

        if qid in ids:
            bad("duplicate id")
        ids.add(qid)
        if not isinstance(q.get("question"), str) or not q["question"].strip():
            bad("no question text")
        hist = q.get("history")
        if hist is not None and (not isinstance(hist, list) or not hist
                                 or not all(isinstance(h, str) and h.strip() for h in hist)):
            bad("history must be a non-empty list of questions")
        if q.get("unanswerable"):
            if q.get("document") is not None or q.get("page") is not None or q.get("answers"):
                bad("an unanswerable question names no document, page or answers")
            continue
        doc, page, answers = q.get("document"), q.get("page"), q.get("answers")
        if doc not in formats:
            bad(f"document {doc!r} is not in {manifest_name}")
            continue
        if q.get("format") != formats[doc] or q.get("format") not in FORMATS:
            bad(f"format {q.get('format')!r}, the manifest says {formats[doc]!r}")
        if formats[doc] == "pdf":
            if not isinstance(page, int) or not 1 <= page <= texts.page_count(doc):
                bad(f"page {page!r} is not a page of {doc} ({texts.page_count(doc)} pages)")
                continue
        elif page is not None:
            bad("page must be null for a non-PDF document")
            page = None
        if not isinstance(answers, list) or not 1 <= len(answers) <= 3 or not all(
                isinstance(a, str) and a.strip() for a in answers):
            bad("answers must be 1-3 non-empty strings")
            continue
        gold = texts.text(doc, page)
        if not any(normalized(a) in gold for a in answers):
            where = f"page {page} of {doc}" if page else doc
            if qid in EXCEPTIONS:
                excused += 1
                print(f"  {qid}: no answer on {where} (known: {EXCEPTIONS[qid]})")
            else:
                bad(f"none of {answers} occurs on {where}")
    return n, excused, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="*", metavar="SET", help="dev, test or second (default: second)")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/docchat/quality"))
    args = ap.parse_args()
    unknown = [s for s in args.sets if s not in MANIFESTS]
    if unknown:
        ap.error(f"unknown set(s) {unknown}: choose from {sorted(MANIFESTS)}")
    failed = False
    for s in args.sets or ["second"]:
        n, excused, problems = check(s, Path(args.cache))
        for p in problems:
            print(f"  {p}")
        print(f"{s}: {n} questions, {len(problems)} problems, {excused} known exceptions")
        failed |= bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
