"""Helpers of bench/embeddings/run.sh.

    bench.py texts  --model-dir DIR --out texts.json [--cells 64:320,256:160] [--seed 7]
    bench.py torch  --model-dir DIR --texts texts.json --out torch.json --threads N [--batch 32]
    bench.py report --rust r1.json,r2.json,... --torch t1.json,t2.json,... [--load-before S --load-after S]

`texts` writes English-like texts of exactly N model tokens each ([CLS] and [SEP]
included, so 256 is all-MiniLM-L6-v2's whole window and nothing is truncated). `torch` runs
sentence-transformers on PyTorch's CPU backend with the same batch size and thread count as
the Rust side and records sentences/s and the embeddings. `report` prints the comparison:
per cell the median sentences/s of each implementation over the alternating rounds, their
ratio, and the smallest cosine between the two implementations' embeddings of a text.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time

WORDS = """
the of and to in is was for on that with as by at from his it an were are which this be or
had not first but one their also its new after who they have her she two been other when there
all during into school time may years more most only over city some world would where later up
such used many can state about national out known university united then made than part
american against between them before under while including each several century area government
people new music team since high population through both well three however any year number
called because however known main north city south second found became public film include
water history system series based last company early large season four these long around
following work member day within among against around river play small local service include
research document report data model question answer language search result library service
engineer network server memory process request response value design example method paper
study analysis measure experiment evidence theory review market price policy energy health
""".split()
FILLERS = ["the", "of", "and", "to", "in", "a", "is", "was", ",", "."]


def cmd_texts(args):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def count(text):
        return len(tok.encode(text, add_special_tokens=True).ids)

    rng = random.Random(args.seed)
    cells = []
    for spec in args.cells.split(","):
        tokens, n = (int(x) for x in spec.split(":"))
        texts, seen = [], set()
        while len(texts) < n:
            words = [f"item{len(texts)}"]  # every text differs from its first words on
            while count(" ".join(words)) < tokens - 6:
                words.append(rng.choice(WORDS))
                if rng.random() < 0.08:
                    words.append(rng.choice([",", "."]))
            while count(" ".join(words)) < tokens:
                words.append(rng.choice(FILLERS))
            text = " ".join(words)
            if count(text) == tokens and text not in seen:
                seen.add(text)
                texts.append(text)
        cells.append({"name": f"{tokens} tokens", "tokens": tokens, "texts": texts})
    with open(args.out, "w") as f:
        json.dump({"cells": cells}, f)


def cmd_torch(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.eval()
    with open(args.texts) as f:
        cells = json.load(f)["cells"]
    out = []
    for cell in cells:
        texts = cell["texts"]
        model.encode(texts[: args.batch], batch_size=args.batch, show_progress_bar=False)
        sps, vectors = [], None
        for _ in range(args.rounds):
            start = time.perf_counter()
            vectors = model.encode(texts, batch_size=args.batch, show_progress_bar=False,
                                   convert_to_numpy=True)
            sps.append(len(texts) / (time.perf_counter() - start))
        print(f"torch {cell['name']}: " + ", ".join(f"{s:.1f}" for s in sps)
              + " sentences/s per round", file=sys.stderr)
        out.append({"name": cell["name"], "sentences_per_second": sps,
                    "embeddings": vectors.tolist()})
    with open(args.out, "w") as f:
        json.dump({"implementation": f"sentence-transformers on torch {torch.__version__} (CPU)",
                   "threads": torch.get_num_threads(), "batch": args.batch, "cells": out}, f)


def cmd_report(args):
    import numpy as np

    def load(paths):
        return [json.load(open(p)) for p in paths.split(",") if p]

    rust, torch_runs = load(args.rust), load(args.torch)
    names = [c["name"] for c in rust[0]["cells"]]
    rows = []
    for i, name in enumerate(names):
        r = [s for run in rust for s in run["cells"][i]["sentences_per_second"]]
        t = [s for run in torch_runs for s in run["cells"][i]["sentences_per_second"]]
        a = np.asarray(rust[-1]["cells"][i]["embeddings"], dtype=np.float64)
        b = np.asarray(torch_runs[-1]["cells"][i]["embeddings"], dtype=np.float64)
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        rows.append((name, r, t, cos.min(), len(a)))

    print()
    print(f"all-MiniLM-L6-v2, batch {rust[0]['batch']}, threads: docchat {rust[0]['threads']}, "
          f"torch {torch_runs[0]['threads']}; {len(rust)} alternating rounds per side")
    print(f"docchat:   {rust[0]['implementation']}")
    print(f"reference: {torch_runs[0]['implementation']}")
    if args.load_before or args.load_after:
        print(f"load average before: {args.load_before}")
        print(f"load average after:  {args.load_after}")
    print()
    header = ("cell", "texts", "docchat sent/s", "torch sent/s", "ratio", "min cosine")
    fmt = "| {:<11} | {:>5} | {:>22} | {:>22} | {:>5} | {:>14} |"
    print(fmt.format(*header))
    print("|" + "|".join("-" * (w + 2) for w in (11, 5, 22, 22, 5, 14)) + "|")
    for name, r, t, cmin, n in rows:
        rm, tm = statistics.median(r), statistics.median(t)
        rs = f"{rm:.1f} ({min(r):.1f}-{max(r):.1f})"
        ts = f"{tm:.1f} ({min(t):.1f}-{max(t):.1f})"
        print(fmt.format(name, n, rs, ts, f"{rm / tm:.2f}x", f"{cmin:.12f}"))
    print()
    print("sent/s: median (min-max) over rounds; ratio: docchat median / torch median")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("texts")
    t.add_argument("--model-dir", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--cells", default="64:320,256:160")
    t.add_argument("--seed", type=int, default=7)
    b = sub.add_parser("torch")
    b.add_argument("--model-dir", required=True)
    b.add_argument("--texts", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--threads", type=int, required=True)
    b.add_argument("--batch", type=int, default=32)
    b.add_argument("--rounds", type=int, default=1)
    r = sub.add_parser("report")
    r.add_argument("--rust", required=True)
    r.add_argument("--torch", required=True)
    r.add_argument("--load-before", default="")
    r.add_argument("--load-after", default="")
    args = p.parse_args()
    {"texts": cmd_texts, "torch": cmd_torch, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
