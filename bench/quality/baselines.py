"""Offline retrieval baselines over a list of chunk texts: BM25 (Okapi), dense
all-MiniLM-L6-v2 (mean-pooled, L2-normalised, implemented here in numpy from the model's
safetensors and tokenizer.json) and their reciprocal-rank fusion (k = 60)."""

import hashlib
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np

WORD = re.compile(r"\w+", re.UNICODE)
RRF_K = 60.0


def words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if len(w) >= 2 or w.isdigit()]


class BM25:
    """Okapi BM25 (k1 = 1.2, b = 0.75), lowercased word tokens, no stemming or stop list."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs = [Counter(words(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(texts) else 0.0
        df = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(texts)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for w, tf in d.items():
                self.postings.setdefault(w, []).append((i, tf))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.avg, 1e-9))
        for w in set(words(query)):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, tf in self.postings[w]:
                out[i] += idf * tf * (self.k1 + 1) / (tf + norm[i])
        return out


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): BERT's GELU is the exact erf form.
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 forward pass in numpy (float32)."""

    def __init__(self, model_dir: Path, max_tokens: int = 256):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = load_file(str(model_dir / "model.safetensors"))
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_tokens)
        self.tok.no_padding()
        self.heads = 12
        self.layers = 6
        # Weights transposed once (contiguous), query/key/value fused into one matrix.
        self.t = {}
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = [p + f"attention.self.{n}" for n in ("query", "key", "value")]
            self.t[p + "qkv"] = (np.ascontiguousarray(np.concatenate([self.w[n + ".weight"] for n in qkv]).T),
                                 np.concatenate([self.w[n + ".bias"] for n in qkv]))
            for n in ("attention.output.dense", "intermediate.dense", "output.dense"):
                self.t[p + n] = (np.ascontiguousarray(self.w[p + n + ".weight"].T), self.w[p + n + ".bias"])

    def _lin(self, x, name):
        w, b = self.t[name]
        shape = x.shape
        return (x.reshape(-1, shape[-1]) @ w + b).reshape(*shape[:-1], w.shape[1])

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's token vectors, (batch, tokens, 384)."""
        w = self.w
        bsz, n = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        d = x.shape[-1] // self.heads
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = self._lin(x, p + "qkv").reshape(bsz, n, 3, self.heads, d)
            # Contiguous operands: numpy's stacked matmul is far slower on strided views.
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            ctx = np.empty((bsz, self.heads, n, d), dtype=np.float32)
            scale = 1.0 / math.sqrt(d)
            for b in range(bsz):  # 2-D products: numpy's stacked matmul is slow here
                for h in range(self.heads):
                    att = (q[b, h] @ k[b, h]) * scale + bias[b, 0]
                    att = np.exp(att - att.max(-1, keepdims=True))
                    att /= att.sum(-1, keepdims=True)
                    ctx[b, h] = att @ v[b, h]
            ctx = ctx.transpose(0, 2, 1, 3).reshape(bsz, n, -1)
            x = _layer_norm(x + self._lin(ctx, p + "attention.output.dense"),
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            h = _gelu(self._lin(x, p + "intermediate.dense"))
            x = _layer_norm(x + self._lin(h, p + "output.dense"),
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        return x

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        x = self.hidden(ids, mask)
        m = mask[..., None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)

    def embed(self, texts: list[str], batch: int = 16, cache_dir: Path | None = None) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        todo = []
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        for i, key in enumerate(keys):
            f = cache_dir / f"{key}.npy" if cache_dir else None
            if f is not None and f.exists():
                out[i] = np.load(f)
            else:
                todo.append(i)
        encs = {i: self.tok.encode(texts[i]) for i in todo}
        todo.sort(key=lambda i: len(encs[i].ids))  # similar lengths together: little padding
        for s in range(0, len(todo), batch):
            part = todo[s:s + batch]
            n = max(len(encs[i].ids) for i in part)
            ids = np.zeros((len(part), n), dtype=np.int64)
            mask = np.zeros((len(part), n), dtype=np.int64)
            for r, i in enumerate(part):
                e = encs[i].ids
                ids[r, :len(e)] = e
                mask[r, :len(e)] = 1
            vecs = self._forward(ids, mask)
            for r, i in enumerate(part):
                out[i] = vecs[r]
                if cache_dir:
                    cache_dir.mkdir(parents=True, exist_ok=True)
                    np.save(cache_dir / f"{keys[i]}.npy", vecs[r])
        return out


def ranking(scores: np.ndarray, depth: int) -> list[int]:
    idx = np.argsort(-scores, kind="stable")[:depth]
    return [int(i) for i in idx]


def rrf(rankings: list[list[int]], depth: int) -> list[int]:
    score: dict[int, float] = {}
    for r in rankings:
        for pos, i in enumerate(r):
            score[i] = score.get(i, 0.0) + 1.0 / (RRF_K + pos + 1)
    return [i for i, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))][:depth]
