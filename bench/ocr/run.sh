#!/usr/bin/env bash
# OCR benchmark (bench/ocr/README.md): makes the scans (16 real pages of three Debian-packaged
# PDFs, degraded like office scans, black-and-white scans and phone photos, in image-only and
# mixed PDFs, JPEG, multi-page TIFF, PNG and WebP; make_scans.py) into a cache, reused while
# make_scans.py and the imaging pins are unchanged, then prints the character error rate and
# pages/s of plain Tesseract on them (tesseract_baseline.py), dev and held-out apart, then
# docchat's own OCR through its REST API beside it (docchat_ocr.py), with retrieval on the
# scanned pages.
#
#   bench/ocr/run.sh                     # dev and held-out parts
#   bench/ocr/run.sh --parts dev         # the part to tune on (never tune on held-out)
#   bench/ocr/run.sh --jobs 1            # plain Tesseract one page at a time (default 2: the cores)
#   bench/ocr/run.sh --gateway PATH      # docchat's gateway binary (default: release, else debug)
#
# Run it alone (2 cores): the pages/s figure is wall clock.
set -euo pipefail
# --parts goes to both runs, --jobs to plain Tesseract's, --gateway to docchat's.
common=() baseline=() docchat=()
while [ $# -gt 0 ]; do
  case "$1" in
    --parts) common+=(--parts "$2"); shift 2 ;;
    --jobs) baseline+=(--jobs "$2"); shift 2 ;;
    --gateway) docchat+=(--gateway "$2"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
cache="${DOCCHAT_OCR_CACHE:-$HOME/.cache/docchat/ocr-bench}"
for tool in tesseract pdftoppm pdftotext; do
  command -v "$tool" >/dev/null || { echo "needs $tool (Debian: tesseract-ocr tesseract-ocr-eng poppler-utils)" >&2; exit 2; }
done
command -v dpkg >/dev/null && command -v apt-get >/dev/null || { echo "needs apt-get and dpkg (Debian) to fetch the source PDFs" >&2; exit 2; }
# The checks' one venv (tests/requirements.txt: Pillow, numpy, pypdf, rapidfuzz for this benchmark).
python="$("$root/scripts/python-env.sh")"

# The scans: keyed by make_scans.py and the pins that decide their bytes.
key="$({ cat "$here/make_scans.py"; grep -iE '^(pillow|numpy|pypdf)==' "$root/tests/requirements.txt"; } | sha256sum | cut -c1-12)"
scans="$cache/scans-$key"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$scans/truth.json" ]; then
  echo "making the scans into $scans" >&2
  rm -rf "$scans.tmp"
  "$python" "$here/make_scans.py" "$scans.tmp" >/dev/null
  for old in "$cache"/scans-*; do
    [ "$old" = "$scans.tmp" ] || rm -rf "$old"
  done
  mv "$scans.tmp" "$scans"
fi
flock -u 9

# Plain Tesseract: the figure a user gets without docchat.
"$python" "$here/tesseract_baseline.py" "$scans" "${common[@]}" "${baseline[@]}"

# docchat through REST: a standalone docchat (the built gateway: release if built, else debug;
# --gateway PATH picks one) ingests the same files with ocr_model=auto, its stored page text is
# scored the same way, and retrieval is asked whether each scanned page comes first.
"$python" "$here/docchat_ocr.py" "$scans" "${common[@]}" "${docchat[@]}"
