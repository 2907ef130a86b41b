#!/usr/bin/env python3
"""docchat's own text recognition on the OCR benchmark's scans, through its REST API, beside
plain Tesseract (tesseract_baseline.py): the same files, the same truth, the same character
error rate (cer.py).

How: a standalone docchat (the built gateway, release if built, else debug; its own data
directory; a scripted upstream as the chat model, as bench/quality does) ingests each part's
files into a collection of its own through REST (PUT /uploads, POST
/uploads/{id}/ingest/job, GET /jobs/{id}), all of a part's files queued at once (the service's
2 ingestion workers and 2 recognition slots share the 2 cores); pages/s is the part's pages
over the wall clock from the first upload to the last job's end (rendering, recognition,
chunking, embedding and storing included). Each page's text is read back through docchat's
MCP endpoint (`get_document`, the stored page text) and scored against the truth. Then
retrieval: for every scanned page, a question made of 12 of its truth's words (from its
middle) is asked as a RAG completion, and its first reference must name the file and the
page (top-1); the page among the first 8 references' pages is top-8.

Usage: docchat_ocr.py SCANDIR [--parts dev,held-out] [--gateway PATH] [--models-dir DIR]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "quality"))
import cer  # noqa: E402
from run import Docchat, Upstream, free_port, pages_of  # noqa: E402  (bench/quality/run.py)


def mcp(dc: Docchat, tool: str, arguments: dict) -> dict:
    """One tools/call on docchat's stateless MCP endpoint; the tool's structured result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    r = dc.s.post(dc.root + "/mcp", json=body, timeout=60,
                  headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
    r.raise_for_status()
    result = r.json()["result"]
    if result.get("isError"):
        raise RuntimeError(f"{tool}: {result}")
    return result.get("structuredContent") or json.loads(result["content"][0]["text"])


def page_texts(dc: Docchat, document_id: str) -> dict[int, str]:
    texts, cursor = {}, None
    while True:
        args = {"document_id": document_id} | ({"cursor": cursor} if cursor else {})
        out = mcp(dc, "get_document", args)
        for p in out["pages"]:
            texts[p["page"]] = texts.get(p["page"], "") + p["text"]
        cursor = out.get("next_cursor")
        if not cursor:
            return texts


def ingest_part(dc: Docchat, scandir: Path, names: list[str]) -> tuple[str, dict, float]:
    """The part's collection, its documents by file name, and the wall seconds."""
    col = dc.call("POST", "/collections", json={"name": f"ocr-{time.time_ns()}", "description": "OCR benchmark"})["id"]
    t0 = time.monotonic()
    jobs = {}
    for name in names:
        with open(scandir / name, "rb") as fh:
            up = dc.call("PUT", "/uploads", files={"file": (name, fh)})
        job = dc.call("POST", f"/uploads/{up['id']}/ingest/job", params={"collection_id": col, "ocr_model": "auto"})
        jobs[job["id"]] = name
    done = {}
    while len(done) < len(jobs):
        for jid, name in jobs.items():
            if name in done:
                continue
            j = dc.call("GET", f"/jobs/{jid}")
            if j["overall_status"] in ("completed", "failed", "canceled"):
                if j["overall_status"] != "completed":
                    raise RuntimeError(f"{name}: {j['overall_status']} {j.get('errors')}")
                done[name] = j
        time.sleep(0.2)
    wall = time.monotonic() - t0
    docs = {d["name"]: d for d in dc.call("GET", f"/collections/{col}/documents", params={"limit": 100})}
    return col, docs, wall


def sandbox_runs(probe: int) -> tuple[float, float]:
    """Recognitions so far (pages and images) and their seconds, from docchat's metrics."""
    page = requests.get(f"http://127.0.0.1:{probe}/metrics", timeout=10).text
    value = lambda name: sum(float(line.split()[-1]) for line in page.splitlines() if line.startswith(name + " "))
    return value("docchat_ocr_page_seconds_count"), value("docchat_ocr_page_seconds_sum")


def question_of(text: str) -> str:
    words = re.findall(r"[A-Za-z][A-Za-z'-]{2,}", text)
    middle = max(0, len(words) // 2 - 6)
    return " ".join(words[middle:middle + 12])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scandir")
    ap.add_argument("--parts", default="dev,held-out")
    ap.add_argument("--gateway")
    ap.add_argument("--models-dir", default=os.environ.get("DOCCHAT_MODELS_DIR", os.path.expanduser("~/.cache/docchat/models")))
    ap.add_argument("--json")
    args = ap.parse_args()
    scandir = Path(args.scandir)
    truth = json.loads((scandir / "truth.json").read_text())
    target = Path(os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/docchat/target")))
    binary = Path(args.gateway) if args.gateway else next(
        (p for p in (target / "release/gateway", target / "debug/gateway") if p.exists()), None)
    if binary is None or not binary.exists():
        sys.exit(f"no gateway binary under {target} (build it, or pass --gateway)")
    upstream = Upstream()
    work = Path(tempfile.mkdtemp(prefix="docchat-ocr-"))
    (work / "models.toml").write_text(
        "[[models]]\nname = \"scripted\"\nbase_url = \"http://127.0.0.1:%d/v1\"\n"
        "context_length = 100000000\ndefault = true\n" % upstream.port)
    port, probe, key = free_port(), free_port(), "sk-ocr-bench"
    env = dict(os.environ, DOCCHAT_DATA_DIR=str(work / "data"), DOCCHAT_MODELS_DIR=args.models_dir,
               DOCCHAT_MODELS_FILE=str(work / "models.toml"), DOCCHAT_HTTP_ADDR=f"127.0.0.1:{port}",
               DOCCHAT_PROBE_ADDR=f"127.0.0.1:{probe}",
               DOCCHAT_BOOTSTRAP_ADMIN_KEY=key, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    log = open(work / "gateway.log", "w")
    gw = subprocess.Popen([str(binary), "--standalone"], env=env, stdout=log, stderr=subprocess.STDOUT)
    out = {"gateway": str(binary), "scans": str(scandir), "parts": {}}
    try:
        dc = Docchat(f"http://127.0.0.1:{port}", key)
        if not dc.ready(120):
            sys.exit(f"docchat did not become ready; log: {work / 'gateway.log'}")
        print(f"docchat's OCR ({binary}; ocr_model=auto, 2 recognition slots) through REST; "
              f"CER/WER after NFKC + whitespace collapse (bench/ocr/cer.py)")
        summary = []
        for part in [p for p in args.parts.split(",") if p]:
            names = truth["split"][part]
            before = sandbox_runs(probe)
            col, docs, wall = ingest_part(dc, scandir, names)
            runs, run_seconds = (a - b for a, b in zip(sandbox_runs(probe), before))
            records = []
            for name in names:
                meta = truth["files"][name]
                texts = page_texts(dc, docs[name]["id"])
                for i, page in enumerate(meta["pages"], start=1):
                    s = cer.score(texts.get(i, ""), page["text"])
                    records.append({"file": name, "page": i, "layer": page["layer"], "cer": s.cer, "wer": s.wer,
                                    "score": s, "text": texts.get(i, "")})
            # Retrieval: does the scanned page come first?
            top1 = top8 = asked = 0
            for name in names:
                for i, page in enumerate(truth["files"][name]["pages"], start=1):
                    if page["layer"] != "image":
                        continue
                    q = question_of(page["text"])
                    # A session per question: no history to rewrite it with.
                    sid = dc.call("POST", "/chats", params={"collection_id": col}, json={})["id"]
                    reply = dc.call("POST", f"/chats/{sid}/completions", json={
                        "message": q, "llm": "scripted", "stream": False,
                        "llm_args": {"max_new_tokens": 8}, "rag_config": {"rag_type": "rag"}})
                    refs = dc.call("GET", f"/messages/{reply['message_id']}/references")
                    dc.call("DELETE", f"/chats/{sid}")
                    hits = [(r["document_name"], pages_of(r)) for r in refs]
                    asked += 1
                    top1 += bool(hits) and hits[0][0] == name and i in hits[0][1][:1]
                    top8 += any(n == name and i in ps for n, ps in hits[:8])
            print(f"\n{part}")
            print(f"  {'file':16} {'kind':15} {'pages':>5} {'CER':>7} {'WER':>7}")
            for name in names:
                rs = [r for r in records if r["file"] == name]
                s = cer.Score()
                for r in rs:
                    s.add(r["score"])
                print(f"  {name:16} {truth['files'][name]['kind']:15} {s.pages:>5} {s.cer:>7.2%} {s.wer:>7.2%}")
            scanned = cer.Score()
            for r in records:
                if r["layer"] == "image":
                    scanned.add(r["score"])
            n = len(records)
            print(f"  {'scanned pages':32} {scanned.pages:>5} {scanned.cer:>7.2%} {scanned.wer:>7.2%}")
            print(f"  speed: {n} pages ingested in {wall:.1f} s wall = {n / wall:.2f} pages/s (recognition, "
                  f"chunking, embedding, storing); {runs:.0f} recognitions in the sandbox, "
                  f"{run_seconds / max(runs, 1):.2f} s each (rendering and recognizing, from /metrics)")
            print(f"  retrieval through REST: the scanned page first for {top1}/{asked} questions, "
                  f"among the first 8 references for {top8}/{asked}")
            summary.append((part, scanned, n / wall, top1, top8, asked))
            out["parts"][part] = {"wall_seconds": wall, "pages": n, "pages_per_second": n / wall,
                                  "scanned_cer": scanned.cer, "scanned_wer": scanned.wer,
                                  "top1": top1, "top8": top8, "questions": asked,
                                  "records": [{k: v for k, v in r.items() if k != "score"} for r in records]}
        print("\nsummary (scanned pages)")
        for part, scanned, pps, top1, top8, asked in summary:
            print(f"  {part:9} CER {scanned.cer:.2%}  WER {scanned.wer:.2%}  {pps:.2f} pages/s  "
                  f"right page first {top1}/{asked}, in top 8 {top8}/{asked}")
        path = Path(args.json) if args.json else (
            Path.home() / ".cache/docchat/ocr-bench/results" / time.strftime("docchat-%Y%m%d-%H%M%S.json"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        print(f"\nper-page texts and scores: {path}")
    finally:
        gw.terminate()
        try:
            gw.wait(30)
        except subprocess.TimeoutExpired:
            gw.kill()


if __name__ == "__main__":
    main()
