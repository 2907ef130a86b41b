#!/usr/bin/env bash
# The compatible API against its peers, in one run, on the same fast local fake upstream:
# direct, docchat's /compat_api/v1 (standalone, its own process) and LiteLLM's proxy
# (2 workers, no database). Prints the table, the added latency, the 5 ms-per-token stream
# check and docchat's peak memory (gateway/examples/bench_compat.rs).
#
# Usage: bench/compat/run.sh [--requests N] [--no-litellm]
#
# Needs PyPI once: litellm[proxy] in a virtualenv at ~/.cache/docchat/litellm-venv
# (LITELLM_VENV). Run it alone: everything shares the machine's cores.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"
venv="${LITELLM_VENV:-$HOME/.cache/docchat/litellm-venv}"
litellm_version="1.100.0"  # newer releases need a certifi newer than PyPI mirrors here carry

args=()
use_litellm=1
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) args+=(--requests "$2"); shift 2 ;;
    --no-litellm) use_litellm=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ "$use_litellm" = 1 ]; then
  if [ ! -x "$venv/bin/litellm" ] || [ "$(cat "$venv/.version" 2>/dev/null)" != "$litellm_version" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "litellm[proxy]==$litellm_version"
    echo "$litellm_version" >"$venv/.version"
  fi
  args+=(--litellm "$venv/bin/litellm")
fi

cd "$root"
cargo build --release --locked -p docchat-server --bin gateway --example bench_compat
exec "$CARGO_TARGET_DIR/release/examples/bench_compat" "${args[@]}"
