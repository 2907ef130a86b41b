#!/usr/bin/env python3
"""Offline replay of docchat's ranking over a kept `ingest.db`, to try changes to the order
of a document's chunks without building docchat (bench/quality/README.md, session 32).

It reads docchat's own chunks and embeddings, runs the same lexical query on its FTS5 table
(BM25), fuses the two top-50 lists by reciprocal rank and orders each document's chunks by
the dense-leaning blend, as ingest-service `search.rs` and `fusion.rs` do; the query is
embedded here in numpy (f32, where docchat's embedder is int8), and a hit cites its chunk's
first page (docchat's `pages.rs` picks the best-matching part of a chunk spanning a page
break), so the replay's figures are close to, not equal to, docchat's. Each variant then
changes only the within-document order.

    bench/quality/run.sh --parts dev --no-baselines --keep   # keeps /tmp/docchat-quality-*/data
    ~/.cache/docchat/venv/bin/python bench/quality/replay.py \\
        /tmp/docchat-quality-*/data/ingest.db [--models-dir DIR] [--part dev] \\
        [--variants base,late,sentences,proximity]
"""

import argparse
import hashlib
import json
import math
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402

CANDIDATES = 50  # search.rs: (top_k * 4).max(50)
TOP_K = 8
DENSE_WEIGHT = 0.8  # fusion.rs


class Corpus:
    def __init__(self, db_path: str):
        self.db = sqlite3.connect(db_path)
        rows = self.db.execute(
            "SELECT c.id, d.name, c.chunk_index, c.text, c.pages, c.embedding "
            "FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id").fetchall()
        self.ids = [r[0] for r in rows]
        self.doc = {r[0]: r[1] for r in rows}
        self.index = {r[0]: r[2] for r in rows}
        self.text = {r[0]: r[3] for r in rows}
        self.pages = {r[0]: [int(p) for p in r[4].split(",") if p.strip()] for r in rows}
        e = np.stack([np.frombuffer(r[5], dtype="<f4") for r in rows])
        self.emb = e / np.linalg.norm(e, axis=1, keepdims=True)
        self.row = {cid: i for i, cid in enumerate(self.ids)}

    def lexical(self, question: str) -> list[tuple[int, float]]:
        words = []
        for w in re.split(r"[^\w]", question):  # search.rs terms()
            w = w.lower()
            if len(w) >= 2 and w not in words:
                words.append(w)
        fts = " OR ".join(f'"{w}"' for w in words[:32])
        return self.db.execute(
            "SELECT c.id, -bm25(chunks_fts) FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts), c.id LIMIT ?", (fts, CANDIDATES)).fetchall()


def minmax(hits):
    if not hits:
        return {}
    hi, lo = max(h[1] for h in hits), min(h[1] for h in hits)
    span = hi - lo if hi > lo else 1.0
    return {i: (s - lo) / span for i, s in hits}


def order_within(corpus, fused, key):
    """fusion.rs order_within_documents: `fused` ids, best first."""
    out = list(fused[:TOP_K])
    seen = set()
    for cid in fused[:TOP_K]:
        d = corpus.doc[cid]
        if d in seen:
            continue
        seen.add(d)
        places = [i for i in range(len(out)) if corpus.doc[fused[i]] == d]
        ranked = sorted((c for c in fused if corpus.doc[c] == d), key=lambda c: (-key(c), c))
        for place, c in zip(places, ranked):
            out[place] = c
    return out


class Variants:
    """Each variant: (question, query vector, dense 0..1, lexical 0..1, fused) -> key(chunk)."""

    def __init__(self, corpus: Corpus, model: baselines.MiniLM, cache: Path):
        self.c, self.m, self.cache = corpus, model, cache
        stop = ("a an the of to in on for and or is are be been was were by with as at from that this "
                "these those it its how what which who why when where do does did can could should would "
                "will i my me we our you your they them their not no if then than so there into out up "
                "about over under between also any all some more most other another same each both many "
                "much very just only own may might must get use using used").split()
        self.stop = set(stop)
        df = {}
        for cid in corpus.ids:
            for w in set(self.content_words(corpus.text[cid])):
                df[w] = df.get(w, 0) + 1
        n = len(corpus.ids)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def content_words(self, text):
        out = []
        for w in re.findall(r"\w+", text.lower()):
            if w in self.stop or len(w) < 2:
                continue
            for suffix in ("ing", "ed", "es", "s"):
                if len(w) > len(suffix) + 3 and w.endswith(suffix):
                    w = w[: -len(suffix)]
                    break
            out.append(w)
        return out

    @staticmethod
    def blend(dense, lexical):
        return lambda c: DENSE_WEIGHT * dense.get(c, 0.0) + (1 - DENSE_WEIGHT) * lexical.get(c, 0.0)

    def base(self, q, v, dense, lexical, fused):
        return self.blend(dense, lexical)

    def token_vectors(self, text):
        """The last layer's token vectors of one chunk (cached)."""
        f = self.cache / f"tokens-{hashlib.sha256(text.encode()).hexdigest()}.npy"
        if f.exists():
            return np.load(f)
        ids = np.array([self.m.tok.encode(text).ids])
        x = self.m.hidden(ids, np.ones_like(ids))
        self.cache.mkdir(parents=True, exist_ok=True)
        np.save(f, x[0])
        return x[0]

    def late(self, size, mix):
        """Late-chunked windows: mean token vectors over windows of `size` tokens (stride
        size/2); a chunk's dense score becomes mix·best window + (1 − mix)·chunk."""
        def variant(q, v, dense, lexical, fused):
            scores = []
            for cid in fused:
                x = self.token_vectors(self.c.text[cid])[1:-1]
                best = -1.0
                for s in range(0, max(len(x) - size // 2, 1), size // 2):
                    win = x[s:s + size].mean(0)
                    best = max(best, float(win @ v / np.linalg.norm(win)))
                chunk = float(self.c.emb[self.c.row[cid]] @ v)
                scores.append((cid, mix * best + (1 - mix) * chunk))
            return self.blend(minmax(scores), lexical)
        return variant

    @staticmethod
    def sentences(text, per):
        parts = [p for p in re.split(r"(?<=[.!?:;])\s+|\n", text) if p.strip()]
        return [" ".join(parts[i:i + per]) for i in range(max(len(parts) - per + 1, 1))]

    def sentence_windows(self, top, per, mix):
        """The top document's `top` best chunks re-scored by their best window of `per`
        sentences, each embedded on its own (at query time)."""
        def variant(q, v, dense, lexical, fused):
            key = self.blend(dense, lexical)
            first = self.c.doc[fused[0]]
            best = sorted((c for c in fused if self.c.doc[c] == first), key=lambda c: -key(c))[:top]
            if len(best) < 2:
                return key
            window = {}
            for cid in best:
                vecs = self.m.embed(self.sentences(self.c.text[cid], per), cache_dir=self.cache / "sentences")
                window[cid] = float((vecs @ v).max())
            return lambda c: 10 + mix * window[c] + (1 - mix) * key(c) if c in window else key(c)
        return variant

    def proximity(self, per, weight):
        """Term proximity: a chunk's best window of `per` sentences, scored by the summed IDF
        of the question's content words in it, added to the blend with `weight`."""
        def variant(q, v, dense, lexical, fused):
            words = set(self.content_words(q["question"]))
            score = {}
            for cid in fused:
                score[cid] = max(sum(self.idf.get(w, 0.0) for w in words & set(self.content_words(s)))
                                 for s in self.sentences(self.c.text[cid], per))
            top = max(score.values()) or 1.0
            key = self.blend(dense, lexical)
            return lambda c: key(c) + weight * score.get(c, 0.0) / top
        return variant


def evaluate(corpus, questions, vectors, variant):
    r1 = page = pdf = 0
    mrr = 0.0
    for q, v in zip(questions, vectors):
        sims = corpus.emb @ v
        order = np.argsort(-sims, kind="stable")[:CANDIDATES]
        dense = [(corpus.ids[i], float(sims[i])) for i in order]
        lexical = corpus.lexical(q["question"])
        fused = baselines.rrf([[h[0] for h in dense], [h[0] for h in lexical]], 2 * CANDIDATES)
        top = order_within(corpus, fused, variant(q, v, minmax(dense), minmax(lexical), fused))
        rank = next((i + 1 for i, c in enumerate(top) if corpus.doc[c] == q["document"]), None)
        r1 += rank == 1
        mrr += 1 / rank if rank else 0.0
        if q["page"]:
            pdf += 1
            page += rank == 1 and corpus.pages[top[0]][0] == q["page"]
    return r1 / len(questions), mrr / len(questions), page / max(pdf, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--models-dir", type=Path, default=Path.home() / ".cache/docchat/models")
    ap.add_argument("--part", default="dev")
    ap.add_argument("--variants", default="base,late,sentences,proximity")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/docchat/quality/replay")
    args = ap.parse_args()
    corpus = Corpus(args.db)
    model = baselines.MiniLM(args.models_dir / "all-MiniLM-L6-v2")
    questions = [json.loads(line) for line in (HERE / "questions" / f"{args.part}.jsonl").read_text().splitlines() if line.strip()]
    vectors = model.embed([q["question"] for q in questions], cache_dir=args.cache / "questions")
    variants = Variants(corpus, model, args.cache)
    runs = {
        "base": [("base", variants.base)],
        "late": [(f"late windows {s} tokens, mix {m}", variants.late(s, m)) for s in (32, 64, 96) for m in (0.3, 0.5, 1.0)],
        "sentences": [(f"sentence windows top {t}, {p} sentences, mix {m}", variants.sentence_windows(t, p, m))
                      for t in (2, 3, 4) for p in (1, 2, 3) for m in (0.5, 1.0)],
        "proximity": [(f"proximity {p} sentences, weight {w}", variants.proximity(p, w))
                      for p in (1, 2, 3) for w in (0.1, 0.2, 0.4, 0.8)],
    }
    print(f"{len(corpus.ids)} chunks, {len(questions)} {args.part} questions")
    print(f"{'variant':48} {'R@1':>6} {'MRR':>6} {'page R@1':>9}")
    for name in args.variants.split(","):
        for label, variant in runs[name]:
            r1, mrr, page = evaluate(corpus, questions, vectors, variant)
            print(f"{label:48} {r1:6.3f} {mrr:6.3f} {page:9.3f}", flush=True)


if __name__ == "__main__":
    main()
