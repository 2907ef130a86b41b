"""Helpers of bench/embeddings/run.sh.

    bench.py texts       --model-dir DIR --out texts.json [--cells 64:320,256:160] [--seed 7]
    bench.py torch       --model-dir DIR --texts texts.json --out torch.json --threads N [--batch 32]
    bench.py onnx-export --model-dir DIR [--cache-dir DIR]
    bench.py onnx        --model-dir DIR --texts texts.json --out onnx.json --threads N
                         --precision fp32|int8 [--batch 32] [--cache-dir DIR]
    bench.py report      [--rust r1.json,...] [--torch t1.json,...] [--onnx-fp32 f1.json,...]
                         [--onnx-int8 i1.json,...] [--load-before S --load-after S]

`texts` writes English-like texts of exactly N model tokens each ([CLS] and [SEP]
included, so 256 is all-MiniLM-L6-v2's whole window and nothing is truncated). `torch` runs
sentence-transformers on PyTorch's CPU backend with the same batch size and thread count as
the Rust side and records sentences/s and the embeddings. `onnx-export` turns the model's
safetensors into ONNX Runtime models (see ONNX below) and caches them; `onnx` runs one of
them on ONNX Runtime's CPU execution provider the way sentence-transformers encodes (the
tokenizer.json tokenizer, padding to the longest text of a batch, mean pooling over the
attention mask, L2 normalisation) and records the same JSON as `torch`. `report` prints the
comparison: per cell and implementation the median sentences/s over the alternating rounds,
the ratio of docchat's median to it, and the smallest cosine between its embedding of a
text and docchat's and torch's.

ONNX: the BERT encoder is built in torch from model.safetensors and config.json (the module
and parameter names of transformers' BertModel, the attention written as transformers 4.x
wrote it) and exported with torch.onnx.export's TorchScript exporter (dynamo=False, opset 17,
dynamic batch and sequence axes). Two reasons for not exporting transformers' own BertModel
with the default torch.export-based exporter: ONNX Runtime's transformer optimizer fuses no
Attention in the graph that exporter writes (only BiasGelu and the layer norms), so neither
the fp32 model nor the int8 one would get ONNX Runtime's attention kernels (Attention,
QAttention); and transformers 5's BertModel through the TorchScript exporter gave wrong
hidden states (its attention-mask code does not trace). The exported graph goes through
onnxruntime.transformers.optimizer (model_type bert: EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu), which is the fp32 model, and then through
onnxruntime.quantization: quant_pre_process (shape inference) and quantize_dynamic, which is
the int8 model (see QUANTIZATION). Both are cached under ~/.cache/docchat/bench-onnx
(BENCH_ONNX_CACHE, --cache-dir) in a folder named by the model's sha256 and the versions of
torch, onnx and onnxruntime and ONNX_RECIPE.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings

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


# Bump when the steps of onnx_export change, so that cached models are made anew.
ONNX_RECIPE = "r1"
ONNX_OPSET = 17
# quantize_dynamic's settings. Dynamic quantization always quantizes activations to uint8
# (DynamicQuantizeLinear), so the weight type picks between U8S8 (QInt8) and U8U8 (QUInt8).
# ONNX Runtime's quantization guide makes signed 8-bit weights the first choice on CPU and
# says to try U8U8 or reduce_range only when accuracy drops a lot: on x86-64 with AVX2 or
# AVX-512 but no VNNI, U8S8 runs on VPMADDUBSW, whose 16-bit sums can saturate; with VNNI
# (and on ARM) there is no such issue. Per-channel weight scales: with one scale per weight
# tensor, all-MiniLM-L6-v2's int8 embeddings fell to a smallest cosine of 0.86-0.90 to the
# fp32 model's on this benchmark's texts (QUInt8: 0.94-0.95, reduce_range: worse still); with
# one scale per output column the smallest was about 0.97 over the 320 texts of 64 tokens
# (mean 0.99) and 0.985 over the 160 of 256. Most of what remains comes from the FFN output
# MatMuls (their input is GELU's output); leaving those six in fp32 raised the smallest to
# 0.988, but this side is quantize_dynamic over the whole model, as a user would run it, so
# they are quantized too. reduce_range (7-bit weights) is off: it costs accuracy, and
# saturation, which it is for, does not arise with VNNI.
QUANTIZATION = {"weight_type": "QInt8", "per_channel": True, "reduce_range": False}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def onnx_cache_dir(args):
    """The folder of the cached ONNX models of args.model_dir for the installed versions."""
    base = (args.cache_dir or os.environ.get("BENCH_ONNX_CACHE")
            or os.path.expanduser("~/.cache/docchat/bench-onnx"))
    model = os.path.basename(os.path.normpath(args.model_dir))
    sha = _sha256(os.path.join(args.model_dir, "model.safetensors"))[:16]
    versions = "_".join(f"{p}-{importlib.metadata.version(p)}"
                        for p in ("torch", "onnx", "onnxruntime"))
    return os.path.join(base, f"{model}-{sha}", f"{versions}_opset{ONNX_OPSET}_{ONNX_RECIPE}")


def _bert_module(model_dir):
    """all-MiniLM-L6-v2's BERT encoder in plain torch, loaded from model.safetensors; returns
    the last hidden state [batch, seq, hidden] for input_ids, attention_mask, token_type_ids."""
    import math

    import torch
    from safetensors.torch import load_file
    from torch import nn

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
        raise SystemExit(f"onnx-export: {model_dir} is not a BERT with gelu "
                         f"({cfg.get('model_type')}, {cfg.get('hidden_act')})")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    eps = cfg["layer_norm_eps"]

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(cfg["vocab_size"], hidden)
            self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], hidden)
            self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=eps)
            self.register_buffer(
                "position_ids", torch.arange(cfg["max_position_embeddings"]).expand((1, -1)))

        def forward(self, input_ids, token_type_ids):
            position_ids = self.position_ids[:, : input_ids.size(1)]
            return self.LayerNorm(self.word_embeddings(input_ids)
                                  + self.token_type_embeddings(token_type_ids)
                                  + self.position_embeddings(position_ids))

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)

        def heads(self, x):
            return x.view(x.size()[:-1] + (heads, hidden // heads)).permute(0, 2, 1, 3)

        def forward(self, h, mask):
            q, k, v = self.heads(self.query(h)), self.heads(self.key(h)), self.heads(self.value(h))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads) + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
            return ctx.view(ctx.size()[:-2] + (hidden,))

    class Output(nn.Module):
        def __init__(self, n_in):
            super().__init__()
            self.dense = nn.Linear(n_in, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

        def forward(self, x, residual):
            return self.LayerNorm(self.dense(x) + residual)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.self = SelfAttention()
            self.output = Output(hidden)

        def forward(self, h, mask):
            return self.output(self.self(h, mask), h)

    class Intermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, cfg["intermediate_size"])

        def forward(self, x):
            return nn.functional.gelu(self.dense(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.intermediate = Intermediate()
            self.output = Output(cfg["intermediate_size"])

        def forward(self, h, mask):
            a = self.attention(h, mask)
            return self.output(self.intermediate(a), a)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(cfg["num_hidden_layers"]))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = Embeddings()
            self.encoder = Encoder()

        def forward(self, input_ids, attention_mask, token_type_ids):
            mask = attention_mask[:, None, None, :].to(torch.float32)
            mask = (1.0 - mask) * torch.finfo(torch.float32).min
            h = self.embeddings(input_ids, token_type_ids)
            for layer in self.encoder.layer:
                h = layer(h, mask)
            return h

    model = Bert()
    weights = load_file(os.path.join(model_dir, "model.safetensors"))
    # The checkpoint carries BertModel's pooler, which sentence-transformers does not use.
    weights = {k: v for k, v in weights.items() if not k.startswith("pooler.")}
    model.load_state_dict(weights, strict=True)
    return model.eval(), cfg


def onnx_export(args):
    """Makes (once) and returns the cache folder with model-fp32.onnx, model-int8.onnx and
    info.json."""
    out = onnx_cache_dir(args)
    if os.path.exists(os.path.join(out, "info.json")):
        return out
    import onnx
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from onnxruntime.transformers.optimizer import optimize_model

    print(f"onnx-export: {args.model_dir} -> {out}", file=sys.stderr)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(out))
    try:
        model, cfg = _bert_module(args.model_dir)
        names = ["input_ids", "attention_mask", "token_type_ids"]
        ids = torch.randint(1000, 2000, (2, 16))
        mask = torch.ones_like(ids)
        mask[1, 10:] = 0
        raw = os.path.join(tmp, "raw.onnx")
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter warns that it is deprecated (see the module's doc).
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (ids, mask, torch.zeros_like(ids)), raw, dynamo=False,
                              input_names=names, output_names=["last_hidden_state"],
                              opset_version=ONNX_OPSET,
                              dynamic_axes={n: {0: "batch", 1: "sequence"}
                                            for n in names + ["last_hidden_state"]})
        fp32 = optimize_model(raw, model_type="bert", num_heads=cfg["num_attention_heads"],
                              hidden_size=cfg["hidden_size"])
        fused = {k: v for k, v in fp32.get_fused_operator_statistics().items() if v}
        if fused.get("Attention", 0) != cfg["num_hidden_layers"]:
            print(f"onnx-export: warning: the optimizer fused {fused.get('Attention', 0)} of "
                  f"{cfg['num_hidden_layers']} attention layers", file=sys.stderr)
        fp32_path = os.path.join(tmp, "model-fp32.onnx")
        fp32.save_model_to_file(fp32_path)
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(fp32_path, pre, skip_optimization=True)
        int8_path = os.path.join(tmp, "model-int8.onnx")
        quantize_dynamic(pre, int8_path, weight_type=QuantType[QUANTIZATION["weight_type"]],
                         per_channel=QUANTIZATION["per_channel"],
                         reduce_range=QUANTIZATION["reduce_range"])
        int8_ops = {}
        for node in onnx.load(int8_path).graph.node:
            int8_ops[node.op_type] = int8_ops.get(node.op_type, 0) + 1

        # Check the export against the torch module it came from (hidden states of real tokens).
        with torch.no_grad():
            want = model(ids, mask, torch.zeros_like(ids)).numpy()
        sess = onnxruntime.InferenceSession(fp32_path, providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                              "token_type_ids": torch.zeros_like(ids).numpy()})[0]
        err = float(abs(got - want)[mask.numpy().astype(bool)].max())
        if err > 1e-3:
            raise SystemExit(f"onnx-export: the fp32 ONNX model differs from torch by {err}")
        for p in (raw, pre):
            os.remove(p)
        info = {
            "model": os.path.basename(os.path.normpath(args.model_dir)),
            "versions": {p: importlib.metadata.version(p)
                         for p in ("torch", "onnx", "onnxruntime")},
            "opset": ONNX_OPSET,
            "recipe": ONNX_RECIPE,
            "exporter": "torch.onnx.export(dynamo=False)",
            "fp32_fused": fused,
            "fp32_max_abs_diff_to_torch": err,
            "quantization": QUANTIZATION,
            "int8_ops": {k: int8_ops[k] for k in sorted(int8_ops)
                         if k in ("QAttention", "MatMulInteger", "DynamicQuantizeLinear",
                                  "Attention", "MatMul")},
        }
        with open(os.path.join(tmp, "info.json"), "w") as f:
            json.dump(info, f, indent=2)
        if os.path.exists(out):  # a half-made folder from an interrupted run
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"onnx-export: fp32 fused {fused}; int8 {info['int8_ops']}", file=sys.stderr)
    return out


def cmd_onnx_export(args):
    print(onnx_export(args))


def cmd_onnx(args):
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    folder = onnx_export(args)
    with open(os.path.join(folder, "info.json")) as f:
        info = json.load(f)
    with open(os.path.join(args.model_dir, "sentence_bert_config.json")) as f:
        max_len = json.load(f)["max_seq_length"]
    tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    # tokenizer.json pads and truncates to a fixed 128; sentence-transformers pads to the
    # longest text of the batch and truncates at max_seq_length (256).
    tok.enable_truncation(max_len)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(os.path.join(folder, f"model-{args.precision}.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    inputs = {i.name for i in sess.get_inputs()}

    def encode(texts):
        vectors = []
        for start in range(0, len(texts), args.batch):
            enc = tok.encode_batch(texts[start: start + args.batch])
            ids = np.asarray([e.ids for e in enc], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.asarray([e.type_ids for e in enc], dtype=np.int64)
            hidden = sess.run(None, feed)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            norm = np.linalg.norm(pooled, axis=1, keepdims=True)
            vectors.append(pooled / np.clip(norm, 1e-12, None))
        return np.concatenate(vectors)

    with open(args.texts) as f:
        cells = json.load(f)["cells"]
    out = []
    for cell in cells:
        texts = cell["texts"]
        encode(texts[: args.batch])
        sps, vectors = [], None
        for _ in range(args.rounds):
            start = time.perf_counter()
            vectors = encode(texts)
            sps.append(len(texts) / (time.perf_counter() - start))
        print(f"onnx-{args.precision} {cell['name']}: " + ", ".join(f"{s:.1f}" for s in sps)
              + " sentences/s per round", file=sys.stderr)
        out.append({"name": cell["name"], "sentences_per_second": sps,
                    "embeddings": vectors.tolist()})
    if args.precision == "int8":
        q = info["quantization"]
        detail = (f"int8 dynamic quantization ({q['weight_type']} weights, "
                  f"{'per-channel' if q['per_channel'] else 'per-tensor'}"
                  f"{', reduce_range' if q['reduce_range'] else ''}; "
                  + ", ".join(f"{k} x{v}" for k, v in info["int8_ops"].items()) + ")")
    else:
        detail = "fp32 (" + ", ".join(f"{k} x{v}" for k, v in info["fp32_fused"].items()) + ")"
    with open(args.out, "w") as f:
        json.dump({"implementation": f"onnxruntime {ort.__version__} CPU EP, {detail}, "
                                     f"exported with torch {info['versions']['torch']}",
                   "threads": args.threads, "batch": args.batch, "precision": args.precision,
                   "cells": out}, f)


def cmd_report(args):
    import numpy as np

    def load(paths):
        return [json.load(open(p)) for p in (paths or "").split(",") if p]

    sides = [(label, runs) for label, runs in (
        ("docchat", load(args.rust)), ("torch", load(args.torch)),
        ("onnx fp32", load(args.onnx_fp32)), ("onnx int8", load(args.onnx_int8))) if runs]
    if not sides:
        raise SystemExit("report: no runs given")
    runs_of = dict(sides)
    names = [c["name"] for c in sides[0][1][0]["cells"]]

    def cell(runs, name):
        return next(c for c in runs["cells"] if c["name"] == name)

    def min_cosine(a_runs, b_runs, name):
        a = np.asarray(cell(a_runs[-1], name)["embeddings"], dtype=np.float64)
        b = np.asarray(cell(b_runs[-1], name)["embeddings"], dtype=np.float64)
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return cos.min()

    print()
    rounds = ", ".join(f"{label} {len(runs)}" for label, runs in sides)
    threads = ", ".join(f"{label} {runs[0]['threads']}" for label, runs in sides)
    print(f"all-MiniLM-L6-v2, batch {sides[0][1][0]['batch']}, threads: {threads}; "
          f"alternating rounds: {rounds}")
    for label, runs in sides:
        linear = f" (linear layers: {runs[0]['linear']})" if runs[0].get("linear") else ""
        print(f"{label + ':':<11}{runs[0]['implementation']}{linear}")
    if args.load_before or args.load_after:
        print(f"load average before: {args.load_before}")
        print(f"load average after:  {args.load_after}")
    print()
    header = ("cell", "texts", "side", "sent/s", "docchat/this", "min cos docchat",
              "min cos torch")
    fmt = "| {:<11} | {:>5} | {:<9} | {:>22} | {:>12} | {:>15} | {:>15} |"
    widths = (11, 5, 9, 22, 12, 15, 15)
    print(fmt.format(*header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for name in names:
        medians = {label: statistics.median(
            s for run in runs for s in cell(run, name)["sentences_per_second"])
            for label, runs in sides}
        for label, runs in sides:
            sps = [s for run in runs for s in cell(run, name)["sentences_per_second"]]
            texts = len(cell(runs[-1], name)["embeddings"])
            speed = f"{medians[label]:.1f} ({min(sps):.1f}-{max(sps):.1f})"
            ratio = (f"{medians['docchat'] / medians[label]:.2f}x"
                     if "docchat" in medians and label != "docchat" else "-")
            cos = [f"{min_cosine(runs_of[ref], runs, name):.12f}"
                   if ref in runs_of and ref != label else "-" for ref in ("docchat", "torch")]
            print(fmt.format(name, texts, label, speed, ratio, *cos))
    print()
    print("sent/s: median (min-max) over rounds; docchat/this: docchat's median / this side's "
          "median; min cos: the smallest cosine between this side's embedding of a text and "
          "docchat's (torch's)")


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
    e = sub.add_parser("onnx-export")
    e.add_argument("--model-dir", required=True)
    e.add_argument("--cache-dir", default="")
    o = sub.add_parser("onnx")
    o.add_argument("--model-dir", required=True)
    o.add_argument("--texts", required=True)
    o.add_argument("--out", required=True)
    o.add_argument("--threads", type=int, required=True)
    o.add_argument("--precision", choices=("fp32", "int8"), required=True)
    o.add_argument("--batch", type=int, default=32)
    o.add_argument("--rounds", type=int, default=1)
    o.add_argument("--cache-dir", default="")
    r = sub.add_parser("report")
    r.add_argument("--rust", default="")
    r.add_argument("--torch", default="")
    r.add_argument("--onnx-fp32", default="")
    r.add_argument("--onnx-int8", default="")
    r.add_argument("--load-before", default="")
    r.add_argument("--load-after", default="")
    args = p.parse_args()
    {"texts": cmd_texts, "torch": cmd_torch, "onnx-export": cmd_onnx_export, "onnx": cmd_onnx,
     "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
