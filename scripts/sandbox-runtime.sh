#!/usr/bin/env bash
# Installs what agent-service's code sandbox needs on this host when it is missing:
# bubblewrap (Debian's `bubblewrap`, the sandbox backend), util-linux's `prlimit` (the
# resource limits applied inside the sandbox) and the Python packages code is expected to
# use (Debian's python3-numpy, python3-pandas, python3-matplotlib) and Debian's chromium (the
# headless browser of browser_action tools, agent-service/src/browser/), and the text
# recognition of scanned documents (Tesseract, poppler's pdftoppm). Idempotent; scripts/test.sh and scripts/run.sh
# call it. Without root (or apt) it says what is missing and exits 0: agent-service then
# reports the sandbox as unavailable and refuses code tools (see docs/AGENT.md, "The sandbox").
#
#   scripts/sandbox-runtime.sh          install what is missing
#   scripts/sandbox-runtime.sh --check  only report, exit 1 when something is missing
set -euo pipefail

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
# The analyst's Python inside the sandbox: Debian's /usr/bin/python3 with numpy, pandas and
# matplotlib, under /usr, which the sandbox binds read-only (docs/AGENT.md says why these
# come from Debian rather than PyPI).
for module in numpy pandas matplotlib; do
  /usr/bin/python3 -c "import $module" >/dev/null 2>&1 || missing+=("python3-$module")
done
# browser_action tools: Debian's chromium, run headless in the sandbox (the binary itself: the
# /usr/bin/chromium launcher reads /etc/chromium.d, which the sandbox does not have).
[ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
# Text recognition of scanned pages and images (ingest-service/src/ocr.rs), run in the same
# sandbox: Debian's Tesseract with English (more languages: tesseract-ocr-<lang>) and
# poppler's pdftoppm, which renders a PDF's pages to images.
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr)
[ -e /usr/share/tesseract-ocr/5/tessdata/eng.traineddata ] || missing+=(tesseract-ocr-eng)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "sandbox runtime: missing ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "sandbox runtime: missing ${missing[*]} (install them as root: apt-get install ${missing[*]});" \
    "agent-service will refuse code tools until then" >&2
  exit 0
fi
echo "sandbox runtime: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  apt-get update >&2
  apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
