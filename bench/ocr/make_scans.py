#!/usr/bin/env python3
"""Makes the OCR benchmark's scans: real pages of three public PDFs, rendered and degraded
the way office scanners, fax-like black-and-white scanners and phone photos degrade them.

Why: docchat's OCR has to be judged on pages whose true text is known and whose defects
are those of real scans (skew, noise, blur, low resolution, JPEG), in every container a
user uploads (image-only PDF, PDF with some scanned pages, JPEG, multi-page TIFF, PNG,
WebP). Typeset PDFs give both: their text layer is the truth, their rendering the page.

Sources: three PDFs of bench/quality/corpus.tsv, taken from their pinned Debian packages by
bench/quality/fetch.py's own code (apt-get download PKG=VERSION, dpkg -x, sha256-checked;
the packages are shared with that benchmark under ~/.cache/docchat/quality, or
$DOCCHAT_QUALITY_CACHE): the FHS 3.0 (debian-policy; prose and tables), the LaTeX
usrguide (texlive-latex-base-doc; prose and LaTeX code) and groff's mom-pdf (groff; prose
and macro code). 16 pages in all, each used once.

Ground truth of a page: `pdftotext -f N -l N` of the original PDF (its reading order,
hyphenated line ends joined, as poppler does), page feed removed.

Each page is rendered with `pdftoppm -r 300 -gray` and then degraded by FILES below: a
rotation (random sign, range per file), blur, gaussian noise, salt-and-pepper specks, a
lower resolution, uneven light and a warm tint for photos, a threshold to 1 bit for the
black-and-white scanner, JPEG/WebP compression. Every random draw comes from
numpy's default_rng seeded by the file's fixed seed, so with the same poppler, Pillow and
numpy (pinned in tests/requirements.txt) the output is the same byte for byte; truth.json
records each file's sha256 and each page's drawn parameters.

Split: every file is wholly in `dev` (11 pages: tune on these) or `held-out` (5 pages:
never look at them while tuning; report them separately).

Usage: make_scans.py OUTDIR   (run with the checks' venv: scripts/python-env.sh)
Writes OUTDIR/<file> for each file and OUTDIR/truth.json; prints a summary.
"""

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter
from pypdf import PdfReader, PdfWriter
from pypdf import __version__ as pypdf_version

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "quality"))
import fetch  # noqa: E402  bench/quality/fetch.py: read_manifest, unpack_deb

RENDER_DPI = 300
FIXED_DATE = time.gmtime(1704067200)  # 2024-01-01, for reproducible PDFs
SOURCES = ("fhs-3.0.pdf", "latex-usrguide.pdf", "groff-mom-pdf.pdf")

# Each produced file: its part, its container, its pages (source, 1-based page, and for the
# mixed PDF whether the page keeps its text layer) and how its pages are degraded.
#   dpi: resolution after degrading (the page is resampled from the 300 dpi render)
#   rot: (min, max) degrees, random sign      blur: gaussian radius in 300 dpi pixels
#   noise: gaussian sigma (grey levels)       salt: fraction of pixels flipped to black/white
#   bilevel: threshold to 1 bit (this level)  photo: desk margin, uneven light, warm tint
#   quality: JPEG/WebP quality
OFFICE = dict(dpi=300, rot=(1.0, 2.0), blur=0.7, noise=8, salt=0.0, quality=75)
BW = dict(dpi=200, rot=(1.0, 2.5), blur=1.0, noise=24, salt=0.002, bilevel=150)
CHEAP = dict(dpi=150, rot=(1.0, 2.0), blur=0.8, noise=10, salt=0.0, quality=60)
PHOTO = dict(rot=(2.0, 4.0), blur=1.4, noise=12, salt=0.0, quality=70, photo=True)
FILES = [
    # dev
    dict(name="scan-office.pdf", part="dev", seed=101, kind="scanned-pdf", deg=OFFICE,
         pages=[("fhs-3.0.pdf", 9), ("fhs-3.0.pdf", 12), ("latex-usrguide.pdf", 9)]),
    dict(name="mixed.pdf", part="dev", seed=102, kind="mixed-pdf", deg=CHEAP,
         pages=[("fhs-3.0.pdf", 10, "text"), ("groff-mom-pdf.pdf", 4), ("fhs-3.0.pdf", 27, "text")]),
    dict(name="photo-1.jpg", part="dev", seed=103, kind="photo", deg=dict(PHOTO, dpi=200),
         pages=[("groff-mom-pdf.pdf", 7)]),
    dict(name="photo-2.jpg", part="dev", seed=104, kind="photo", deg=dict(PHOTO, dpi=180),
         pages=[("latex-usrguide.pdf", 13)]),
    dict(name="pages.tiff", part="dev", seed=105, kind="tiff-g4", deg=BW,
         pages=[("fhs-3.0.pdf", 13), ("latex-usrguide.pdf", 5)]),
    dict(name="page.png", part="dev", seed=106, kind="png", deg=dict(CHEAP, quality=None),
         pages=[("groff-mom-pdf.pdf", 5)]),
    # held-out: never look at these while tuning
    dict(name="scan-bw.pdf", part="held-out", seed=201, kind="scanned-pdf-bw", deg=BW,
         pages=[("fhs-3.0.pdf", 17), ("latex-usrguide.pdf", 7), ("groff-mom-pdf.pdf", 6)]),
    dict(name="photo-3.jpg", part="held-out", seed=202, kind="photo", deg=dict(PHOTO, dpi=150),
         pages=[("groff-mom-pdf.pdf", 3)]),
    dict(name="page.webp", part="held-out", seed=203, kind="webp",
         deg=dict(dpi=200, rot=(1.0, 2.0), blur=0.8, noise=10, salt=0.0, quality=60),
         pages=[("fhs-3.0.pdf", 33)]),
]


def fetch_sources(dest: Path) -> dict:
    """The source PDFs, by bench/quality/fetch.py's code and checks; returns name -> row."""
    cache = Path(os.environ.get("DOCCHAT_QUALITY_CACHE", Path.home() / ".cache/docchat/quality"))
    rows = {r["name"]: r for r in fetch.read_manifest()}
    out = {}
    for name in SOURCES:
        row = rows[name]
        target = cache / "corpus" / name  # where fetch.py itself puts it
        if not target.exists():
            kind, spec = row["source"].split(":", 1)
            assert kind == "deb", row
            data = (fetch.unpack_deb(spec, cache) / row["member"]).read_bytes()
            if row["member"].endswith(".gz"):
                data = gzip.decompress(data)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        data = target.read_bytes()
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            sys.exit(f"sha256 mismatch: {target}")
        (dest / name).write_bytes(data)
        out[name] = row
    return out


def truth_text(pdf: Path, page: int) -> str:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", "-f", str(page), "-l", str(page), str(pdf), "-"],
                         check=True, capture_output=True).stdout.decode("utf-8")
    return out.replace("\f", "").strip()


def render(pdf: Path, page: int, tmp: Path) -> Image.Image:
    prefix = tmp / f"{pdf.stem}-{page}"
    subprocess.run(["pdftoppm", "-r", str(RENDER_DPI), "-gray", "-f", str(page), "-l", str(page),
                    "-singlefile", str(pdf), str(prefix)], check=True)
    with Image.open(f"{prefix}.pgm") as im:
        return im.convert("L")


def degrade(im: Image.Image, deg: dict, rng: np.random.Generator) -> tuple[Image.Image, dict]:
    """One page, 300 dpi grey in; the degraded page (L, RGB or 1) and what was drawn out."""
    lo, hi = deg["rot"]
    angle = float(round(rng.uniform(lo, hi) * rng.choice([-1, 1]), 2))
    drawn = {"rotation_deg": angle}
    if deg.get("photo"):
        # A page lying on a desk: a dark margin around it, seen a little skewed.
        w, h = im.size
        m = int(0.06 * w)
        desk = Image.new("L", (w + 2 * m, h + 2 * m), 70)
        desk.paste(im, (m, m))
        im = desk.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=70)
    else:
        # A sheet skewed on the scanner glass: same frame, white lid behind the corners.
        im = im.rotate(angle, resample=Image.BICUBIC, expand=False, fillcolor=255)
    if deg.get("blur"):
        im = im.filter(ImageFilter.GaussianBlur(deg["blur"]))
    scale = deg["dpi"] / RENDER_DPI
    if scale != 1:
        im = im.resize((round(im.width * scale), round(im.height * scale)), Image.BILINEAR)
    a = np.asarray(im, dtype=np.float32)
    if deg.get("photo"):
        # Uneven light: a brighter spot off-centre, darker edges; a slightly grey paper.
        yy, xx = np.mgrid[0:a.shape[0], 0:a.shape[1]].astype(np.float32)
        cy, cx = rng.uniform(0.3, 0.7) * a.shape[0], rng.uniform(0.3, 0.7) * a.shape[1]
        d = np.sqrt(((yy - cy) / a.shape[0]) ** 2 + ((xx - cx) / a.shape[1]) ** 2)
        a = a * (0.93 - 0.35 * d)
    if deg.get("noise"):
        a = a + rng.normal(0.0, deg["noise"], a.shape).astype(np.float32)
    if deg.get("salt"):
        flip = rng.random(a.shape, dtype=np.float32)
        a[flip < deg["salt"] / 2] = 0
        a[flip > 1 - deg["salt"] / 2] = 255
    a = np.clip(a, 0, 255)
    if deg.get("bilevel"):
        out = Image.fromarray(np.where(a >= deg["bilevel"], 255, 0).astype(np.uint8), "L").convert("1", dither=Image.Dither.NONE)
    elif deg.get("photo"):
        tint = np.array([1.0, 0.94, 0.82], dtype=np.float32)  # warm indoor light
        out = Image.fromarray(np.clip(a[..., None] * tint, 0, 255).astype(np.uint8), "RGB")
    else:
        out = Image.fromarray(a.astype(np.uint8), "L")
    drawn["size_px"] = list(out.size)
    return out, drawn


def jpeg_in_pdf(images: list[Image.Image], dpi: int, quality: int | None) -> bytes:
    """An image-only PDF, one image a page, as a scanner writes it (Pillow's PDF writer:
    DCT for grey, CCITT G4 for 1 bit). Fixed dates keep it reproducible."""
    buf = io.BytesIO()
    kw = dict(save_all=True, append_images=images[1:], resolution=float(dpi),
              creationDate=FIXED_DATE, modDate=FIXED_DATE,
              producer="docchat bench/ocr/make_scans.py", title="scan")
    if quality:
        kw["quality"] = quality
    images[0].save(buf, "PDF", **kw)
    return buf.getvalue()


def make_file(spec: dict, src: Path, tmp: Path) -> tuple[bytes, list[dict]]:
    rng = np.random.default_rng(spec["seed"])
    deg = spec["deg"]
    pages, images = [], []
    for entry in spec["pages"]:
        name, num = entry[0], entry[1]
        layer = entry[2] if len(entry) > 2 else "image"
        page = {"source": name, "source_page": num, "layer": layer,
                "text": truth_text(src / name, num)}
        if layer == "image":
            im, drawn = degrade(render(src / name, num, tmp), deg, rng)
            page.update(drawn)
            images.append(im)
        pages.append(page)
    kind, dpi, q = spec["kind"], deg.get("dpi"), deg.get("quality")
    buf = io.BytesIO()
    if kind in ("scanned-pdf", "scanned-pdf-bw"):
        return jpeg_in_pdf(images, dpi, q), pages
    if kind == "mixed-pdf":
        writer = PdfWriter()
        scans = iter(images)
        for entry in spec["pages"]:
            if len(entry) > 2 and entry[2] == "text":
                writer.add_page(PdfReader(src / entry[0]).pages[entry[1] - 1])
            else:
                writer.add_page(PdfReader(io.BytesIO(jpeg_in_pdf([next(scans)], dpi, q))).pages[0])
        # No random /ID, no dates: the same bytes every run.
        writer.add_metadata({"/Producer": "docchat bench/ocr/make_scans.py"})
        writer._ID = None
        writer.write(buf)
        return buf.getvalue(), pages
    if kind == "photo":
        # Phones write 72 dpi whatever the page's true resolution.
        images[0].save(buf, "JPEG", quality=q, dpi=(72, 72))
    elif kind == "tiff-g4":
        images[0].save(buf, "TIFF", save_all=True, append_images=images[1:], compression="group4",
                       dpi=(dpi, dpi))
    elif kind == "png":
        images[0].save(buf, "PNG", dpi=(dpi, dpi), optimize=False, compress_level=9)
    elif kind == "webp":
        images[0].save(buf, "WEBP", quality=q, method=4)
    else:
        raise ValueError(kind)
    return buf.getvalue(), pages


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        src = tmp / "src"
        src.mkdir()
        rows = fetch_sources(src)
        files = {}
        for spec in FILES:
            data, pages = make_file(spec, src, tmp)
            (out / spec["name"]).write_bytes(data)
            files[spec["name"]] = {
                "part": spec["part"], "kind": spec["kind"], "seed": spec["seed"],
                "degradation": {k: v for k, v in spec["deg"].items()},
                "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "pages": pages,
            }
            print(f"{spec['name']:16} {spec['part']:8} {len(pages)} page(s) {len(data):>9} bytes", file=sys.stderr)
        # The mixed PDF's text pages keep their layer; its scanned page has none.
        mixed = out / "mixed.pdf"
        for i, page in enumerate(files["mixed.pdf"]["pages"], start=1):
            got = truth_text(mixed, i)
            if page["layer"] == "text" and got != page["text"]:
                sys.exit(f"mixed.pdf page {i}: text layer differs from the source's")
            if page["layer"] == "image" and got:
                sys.exit(f"mixed.pdf page {i}: has a text layer")
    truth = {
        "about": "bench/ocr/make_scans.py: expected text of each page of each file, in page order",
        "make_scans_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "tools": {"pdftoppm": tool_version(["pdftoppm", "-v"]), "pillow": Image.__version__,
                  "numpy": np.__version__, "pypdf": pypdf_version},
        "sources": {n: {"package": r["source"].split(":", 1)[1], "member": r["member"], "sha256": r["sha256"]}
                    for n, r in rows.items()},
        "split": {part: [n for n, f in files.items() if f["part"] == part] for part in ("dev", "held-out")},
        "files": files,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    for part, names in truth["split"].items():
        n = sum(len(files[f]["pages"]) for f in names)
        print(f"{part}: {len(names)} files, {n} pages", file=sys.stderr)
    print(out)


def tool_version(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (p.stdout + p.stderr).strip().splitlines()[0]


if __name__ == "__main__":
    main()
