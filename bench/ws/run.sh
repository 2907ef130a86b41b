#!/usr/bin/env bash
# The h2oGPTe client's chat WebSocket beside REST's JSON-lines stream (bench/ws/bench.py):
# a standalone docchat (release build, started by scripts/run.sh with --no-llm) whose model
# `scripted` is the tests' scripted upstream; prints time to first part and per-part lag.
#
# Usage: bench/ws/run.sh [--rounds N]   (run it alone: everything shares the machine's cores)
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
python="$(scripts/python-env.sh)"
data="$(mktemp -d)"
start_upstream "$python" "$data" 127.0.0.1 127.0.0.1
port="$(free_port)"
key="sk-bench-$(date +%s)"
DOCCHAT_MODELS_FILE="$data/models.toml" DOCCHAT_DATA_DIR="$data" DOCCHAT_HTTP_ADDR="127.0.0.1:$port" \
  DOCCHAT_BOOTSTRAP_ADMIN_KEY="$key" RUST_LOG=warn \
  scripts/run.sh --no-llm >"$data/gateway.log" 2>&1 &
gw=$!
trap 'kill $gw $upstream 2>/dev/null || true; wait $gw 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 6000); do
  kill -0 $gw 2>/dev/null || { cat "$data/gateway.log"; exit 1; }
  curl -fs -H "Authorization: Bearer $key" "http://127.0.0.1:$port/rpc/health/readiness" >/dev/null && break
  sleep 0.2
done
"$python" bench/ws/bench.py "http://127.0.0.1:$port" "$key" "$@"
