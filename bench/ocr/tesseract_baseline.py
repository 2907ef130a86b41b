#!/usr/bin/env python3
"""The OCR benchmark's baseline: what a user would run instead of docchat, plain Tesseract.

Why: docchat's OCR (Debian's Tesseract 5.3 and poppler's pdftoppm in a sandbox) is worth
its cost only next to this figure: the same engine run by hand on the same scans, scored
by the same character error rate (cer.py).

How, for each file of SCANDIR/truth.json (made by make_scans.py):
  PDF   each page rendered with `pdftoppm -r 300 -gray -f N -l N` (as docchat will), then
        `tesseract PAGE stdout -l eng`; every page, including the mixed PDF's text-layer
        pages (a user running plain Tesseract OCRs whole files; those pages are reported
        apart: a clean 300 dpi render, the floor that truth-vs-OCR differences such as
        pdftotext's joined hyphenations leave);
  image `tesseract FILE stdout -l eng` (a multi-page TIFF in one run, its pages split at
        Tesseract's page feeds).
Default page segmentation (--psm 3), OMP_THREAD_LIMIT=1, two jobs at a time (this machine
has 2 cores; --jobs). Each part (dev, held-out) runs as its own batch: its pages/s is its
page count over its wall clock from the first render to the last OCR; CPU s/page is the
children's user+system time over the pages.

Prints a table (file, part, pages, CER, WER, seconds) and per part the CER/WER over the
scanned pages, over all pages, and the speed; writes every page's text and score to
--json (default ~/.cache/docchat/ocr-bench/results/tesseract-<time>.json).

Usage: tesseract_baseline.py SCANDIR [--parts dev,held-out] [--jobs 2] [--json FILE]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cer  # noqa: E402

ENV = dict(os.environ, OMP_THREAD_LIMIT="1")


def tesseract(image: str) -> str:
    p = subprocess.run(["tesseract", image, "stdout", "-l", "eng"], env=ENV, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"tesseract {image}: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout.decode("utf-8", errors="replace")


def pdf_page_job(pdf: Path, page: int, tmp: Path):
    def run():
        prefix = tmp / f"{pdf.stem}-{page}"
        subprocess.run(["pdftoppm", "-r", "300", "-gray", "-f", str(page), "-l", str(page), "-singlefile",
                        str(pdf), str(prefix)], check=True)
        text = tesseract(f"{prefix}.pgm")
        os.unlink(f"{prefix}.pgm")
        return [text]
    return run


def image_job(path: Path, pages: int):
    def run():
        text = tesseract(str(path))
        # Tesseract ends every page with a form feed.
        parts = text.split("\f")
        if len(parts) > pages and not "".join(parts[pages:]).strip():
            parts = parts[:pages]
        if len(parts) != pages:
            raise RuntimeError(f"{path}: {len(parts)} pages read, {pages} expected")
        return parts
    return run


def run_part(scandir: Path, truth: dict, part: str, jobs: int) -> tuple[list[dict], float, float]:
    """OCRs every file of one part; returns its page records, wall seconds and CPU seconds."""
    names = truth["split"][part]
    work = []  # (file, first page index, job)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for name in names:
            n = len(truth["files"][name]["pages"])
            path = scandir / name
            if name.endswith(".pdf"):
                work += [(name, i, pdf_page_job(path, i + 1, tmp)) for i in range(n)]
            else:
                work.append((name, 0, image_job(path, n)))
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()

        def timed(job):
            s = time.monotonic()
            out = job()
            return out, time.monotonic() - s

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(lambda w: timed(w[2]), work))
        wall = time.monotonic() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    records = []
    for (name, first, _), (texts, secs) in zip(work, results):
        meta = truth["files"][name]
        for k, text in enumerate(texts):
            page = meta["pages"][first + k]
            s = cer.score(text, page["text"])
            records.append({
                "file": name, "part": part, "kind": meta["kind"], "page": first + k + 1,
                "layer": page["layer"], "source": f"{page['source']}#{page['source_page']}",
                "seconds": secs / len(texts), "cer": s.cer, "wer": s.wer,
                "char_edits": s.char_edits, "chars": s.chars, "word_edits": s.word_edits,
                "words": s.words, "text": text,
            })
    return records, wall, cpu


def total(records) -> cer.Score:
    out = cer.Score()
    for r in records:
        out.add(cer.Score(r["char_edits"], r["chars"], r["word_edits"], r["words"], 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scandir")
    ap.add_argument("--parts", default="dev,held-out")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    scandir = Path(args.scandir)
    truth = json.loads((scandir / "truth.json").read_text())
    version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    print(f"plain {version} (-l eng, --psm 3, OMP_THREAD_LIMIT=1), {args.jobs} jobs; PDFs rendered "
          f"by pdftoppm -r 300 -gray; CER/WER after NFKC + whitespace collapse (bench/ocr/cer.py)")
    out = {"engine": version, "jobs": args.jobs, "scans": str(scandir),
           "make_scans_sha256": truth["make_scans_sha256"], "parts": {}}
    summary = []
    for part in [p for p in args.parts.split(",") if p]:
        records, wall, cpu = run_part(scandir, truth, part, args.jobs)
        print(f"\n{part}")
        print(f"  {'file':16} {'kind':15} {'pages':>5} {'CER':>7} {'WER':>7} {'s/page':>7}")
        for name in truth["split"][part]:
            rs = [r for r in records if r["file"] == name]
            s = total(rs)
            layers = "".join("T" if r["layer"] == "text" else "i" for r in rs)
            kind = truth["files"][name]["kind"] + (f" {layers}" if "T" in layers else "")
            secs = sum(r["seconds"] for r in rs) / len(rs)
            print(f"  {name:16} {kind:15} {s.pages:>5} {s.cer:>7.2%} {s.wer:>7.2%} {secs:>7.2f}")
        scanned = total(r for r in records if r["layer"] == "image")
        every = total(records)
        n = len(records)
        print(f"  {'scanned pages':32} {scanned.pages:>5} {scanned.cer:>7.2%} {scanned.wer:>7.2%}")
        text_pages = [r for r in records if r["layer"] == "text"]
        if text_pages:
            t = total(text_pages)
            print(f"  {'text-layer pages (floor)':32} {t.pages:>5} {t.cer:>7.2%} {t.wer:>7.2%}")
        print(f"  {'all pages':32} {every.pages:>5} {every.cer:>7.2%} {every.wer:>7.2%}")
        print(f"  speed: {n} pages in {wall:.1f} s wall = {n / wall:.2f} pages/s; CPU {cpu / n:.2f} s/page")
        summary.append((part, scanned, every, n / wall))
        out["parts"][part] = {"wall_seconds": wall, "cpu_seconds": cpu, "pages": n, "pages_per_second": n / wall,
                              "scanned": vars(scanned) | {"cer": scanned.cer, "wer": scanned.wer},
                              "all": vars(every) | {"cer": every.cer, "wer": every.wer}, "records": records}
    print("\nsummary (scanned pages)")
    for part, scanned, _, pps in summary:
        print(f"  {part:9} CER {scanned.cer:.2%}  WER {scanned.wer:.2%}  {pps:.2f} pages/s")
    path = Path(args.json) if args.json else (
        Path.home() / ".cache/docchat/ocr-bench/results" / time.strftime("tesseract-%Y%m%d-%H%M%S.json"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"\nper-page texts and scores: {path}")


if __name__ == "__main__":
    main()
