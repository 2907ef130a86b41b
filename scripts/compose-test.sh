#!/usr/bin/env bash
# The compose stack, run for real (scripts/test.sh calls this):
#   1. a Docker engine: the running one, else ../shared/tools/compose-offline.sh up (or
#      $DOCCHAT_DOCKER_OFFLINE_TOOL) when that tool is there (offline engine and stand-in
#      images, see deploy/README.md); none at all fails the run in CI (CI set) and is a loud
#      SKIPPED outside it;
#   2. the image from the debug binaries of `cargo build --workspace --bins` (the build the
#      test run already has) through the Dockerfile's `prebuilt` target, tagged
#      docchat:compose-test, so no compilation happens inside Docker;
#   3. the object store's image, or where none can be pulled a stand-in (moto; below), and
#      Prometheus' (deploy/prometheus: Debian's package);
#   4. `docker compose up --wait` with docker-compose.yml + tests/compose/compose.test.yml,
#      models from $DOCCHAT_TEST_MODELS_DIR mounted read-only, the scripted upstream on the
#      Docker bridge as the model `scripted`;
#   5. the h2oGPTe and openai client checks against the compose gateway, with Prometheus
#      (tests/compose/check_prometheus.py) scraping every replica before and after them, the
#      counters moved and each replica's page checked by promtool; the trace check
#      (tests/client_compat/check_traces.py --processes) with every service exporting OTLP to
#      a receiver on the Docker bridge;
#   6. hostile input (tests/compose/hostile.py: the cross-user probe of every route, hostile
#      uploads, malformed requests) and schemathesis over the compose gateway;
#   7. the faults of tests/compose/faults.py (kill -9 of an ingest, chat, agent and scheduler
#      replica, broker and database restarts, SIGTERM of every service under load), each with
#      its figures;
#   8. `docker compose down -v`, also when something failed (the services' logs are printed
#      then).
# DOCCHAT_COMPOSE_KEEP=1 leaves the stack up (and the scripted upstream running) to look at.
# DOCCHAT_COMPOSE_TEST_IMAGE=<image> skips 2 and tests that image instead (e.g. one built with
# the Dockerfile's default, self-contained target). Prints the wall time of each step.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
models="$DOCCHAT_TEST_MODELS_DIR"
project="docchat-compose-test"
image="${DOCCHAT_COMPOSE_TEST_IMAGE:-docchat:compose-test}"
# The six services, and agent-service's sandbox helper (the Dockerfile installs it beside agent-service).
binaries=(gateway admin-service ingest-service chat-service agent-service docchat-sandbox-exec scheduler-service)

started=$SECONDS
step_start=$SECONDS
current_step=""
step_line=0
step() {
  printf '\n--> compose: %s (%ss so far)\n' "$*" "$((SECONDS - started))"
  step_start=$SECONDS
  current_step="$*"
  # Where this step's output begins in the copy kept for a failure's summary (below).
  [ -f "${work:-}/output.log" ] && step_line=$(wc -l <"$work/output.log")
  return 0
}
took() { printf '    took %ss\n' "$((SECONDS - step_start))"; }

unavailable() {
  if [ -n "${CI:-}" ]; then
    printf '\nFAILED: compose test cannot run in CI: %s\n' "$*" >&2
    exit 1
  fi
  printf '\n'
  printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
  printf '!! SKIPPED: the compose stack test did not run: %s\n' "$*" >&2
  printf '!! (in CI this fails the run)\n' >&2
  printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
  exit 0
}

step "Docker engine"
if ! docker info >/dev/null 2>&1; then
  offline="${DOCCHAT_DOCKER_OFFLINE_TOOL:-$root/../shared/tools/compose-offline.sh}"
  if [ -f "$offline" ] && [ "$(id -u)" = 0 ]; then
    echo "    no engine running: starting one with $offline"
    bash "$offline" up >/dev/null || unavailable "$offline up failed"
  fi
fi
command -v docker >/dev/null 2>&1 || unavailable "no docker command"
docker info >/dev/null 2>&1 || unavailable "no Docker engine answers (docker info)"
docker compose version >/dev/null 2>&1 || unavailable "no Compose v2 plugin (docker compose version)"
took

work="$(mktemp -d)"
# A copy of everything from here on: when a step fails, its own output is printed again at
# the very end, after the services' logs (CI shows a run's last lines; the logs would hide it).
exec > >(tee -a "$work/output.log") 2>&1
tee_pid=$!
upstream=""
otlp=""
compose() {
  docker compose -p "$project" -f "$root/docker-compose.yml" -f "$root/tests/compose/compose.test.yml" "$@"
}
cleanup() {
  local status=$?
  set +e
  # The failed step's own output, before the services' logs follow it into the copy.
  [ "$status" = 0 ] || tail -n +"$((step_line + 1))" "$work/output.log" >"$work/failed-step.log"
  if [ -n "${brought_up:-}" ] && [ -n "${DOCCHAT_COMPOSE_KEEP:-}" ]; then
    echo "--> compose: left up (DOCCHAT_COMPOSE_KEEP): http://127.0.0.1:$port, key $key;" \
      "docker compose -p $project -f docker-compose.yml -f tests/compose/compose.test.yml down -v"
  elif [ -n "${brought_up:-}" ]; then
    if [ "$status" != 0 ]; then
      echo "--> compose: the services' logs (the run failed)"
      compose logs --no-color --timestamps --tail 200
    fi
    echo "--> compose: down -v"
    down_start=$SECONDS
    compose down -v --remove-orphans >/dev/null 2>&1
    echo "    took $((SECONDS - down_start))s"
  fi
  [ -n "$upstream" ] && [ -z "${DOCCHAT_COMPOSE_KEEP:-}" ] && kill "$upstream" 2>/dev/null
  [ -n "$otlp" ] && [ -z "${DOCCHAT_COMPOSE_KEEP:-}" ] && kill "$otlp" 2>/dev/null
  if [ "$status" != 0 ]; then
    echo "--> compose: the failed step, '$current_step': its last 60 lines again"
    tail -n 60 "$work/failed-step.log"
  fi
  [ -n "${DOCCHAT_COMPOSE_KEEP:-}" ] || rm -rf "$work"
  printf 'compose test: %s after %ss%s\n' "$([ "$status" = 0 ] && echo passed || echo FAILED)" "$((SECONDS - started))" \
    "$([ "$status" = 0 ] || echo " in step '$current_step'")"
  # Everything written reaches the terminal before this script ends.
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit "$status"
}
trap cleanup EXIT

if [ -z "${DOCCHAT_COMPOSE_TEST_IMAGE:-}" ]; then
  step "debug binaries (cargo build --workspace --bins)"
  cargo build --workspace --bins --locked
  took

  step "image $image from the host's debug binaries (Dockerfile target prebuilt)"
  # Only the six files go into the build context (the target dir is many GB); hard links when
  # the target dir is on the same filesystem.
  mkdir "$work/bin"
  for b in "${binaries[@]}"; do
    cp -l "$CARGO_TARGET_DIR/debug/$b" "$work/bin/" 2>/dev/null || cp "$CARGO_TARGET_DIR/debug/$b" "$work/bin/"
  done
  docker build -q -f deploy/Dockerfile --target prebuilt -t "$image" "$work/bin" >/dev/null
  took
else
  docker image inspect "$image" >/dev/null || { echo "no image $image" >&2; exit 1; }
fi

# The object store image docker-compose.yml names; with no registry reachable (the offline
# engine), a stand-in built from tests/compose/minio-standin with moto's wheels from PyPI.
objectstore_image="$(awk '/^  objectstore:/{f=1} f && /image:/{print $2; exit}' docker-compose.yml)"
if ! docker image inspect "$objectstore_image" >/dev/null 2>&1 && ! timeout 60 docker pull -q "$objectstore_image" >/dev/null 2>&1; then
  step "object store stand-in for $objectstore_image (moto, tests/compose/minio-standin)"
  cp -r tests/compose/minio-standin "$work/objectstore"
  python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    -d "$work/objectstore/wheels" -r tests/s3/requirements.txt
  docker build -q -t "$objectstore_image" "$work/objectstore" >/dev/null
  took
fi

step "Prometheus image (deploy/prometheus: Debian's package)"
prometheus_image="docchat-prometheus:compose-test"
docker build -q -t "$prometheus_image" deploy/prometheus >/dev/null
took

step "models and the scripted upstream"
scripts/fetch-models.sh "$models"
python="$(scripts/python-env.sh)"
# The containers reach the host at host.docker.internal (host-gateway: the default bridge's
# address), so the upstream listens there and on nothing else.
bridge="$(ip -4 -o addr show docker0 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')"
[ -n "$bridge" ] || { echo "no docker0 bridge address: the containers could not reach the host" >&2; exit 1; }
start_upstream "$python" "$work" "$bridge" host.docker.internal
# Every service exports its spans (OTLP/HTTP) to the trace check's receiver, there too.
"$python" tests/client_compat/otlp_receiver.py "$bridge" >"$work/otlp.port" &
otlp=$!
for _ in $(seq 1 50); do [ -s "$work/otlp.port" ] && break; sleep 0.1; done
[ -s "$work/otlp.port" ] || { echo "the OTLP receiver did not start" >&2; exit 1; }
export OTEL_EXPORTER_OTLP_ENDPOINT="http://host.docker.internal:$(cat "$work/otlp.port")"
took

step "docker compose up --wait"
port="$(free_port)"
key="sk-compose-$(date +%s)-$RANDOM"
export DOCCHAT_IMAGE="$image"
export DOCCHAT_MODELS_DIR="$models"
export DOCCHAT_TEST_MODELS_FILE="$work/models.toml"
export DOCCHAT_GATEWAY_PUBLISH="127.0.0.1:$port"
prometheus_port="$(free_port)"
export DOCCHAT_PROMETHEUS_IMAGE="$prometheus_image"
export DOCCHAT_PROMETHEUS_PUBLISH="127.0.0.1:$prometheus_port"
export DOCCHAT_BOOTSTRAP_ADMIN_KEY="$key"
export DOCCHAT_INTERNAL_JWT_SECRET="compose-test-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# What a killed earlier run may have left.
compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true
brought_up=1
compose up -d --no-build --wait --wait-timeout 300
took

# Prometheus scrapes every replica (one target each); the counters before the clients' load.
step "Prometheus: every replica a target, up"
replicas="gateway=1,admin-service=1,ingest-service=${DOCCHAT_INGEST_REPLICAS:-2},chat-service=${DOCCHAT_CHAT_REPLICAS:-2}"
replicas="$replicas,agent-service=${DOCCHAT_AGENT_REPLICAS:-2},scheduler-service=${DOCCHAT_SCHEDULER_REPLICAS:-2}"
"$python" tests/compose/check_prometheus.py "http://127.0.0.1:$prometheus_port" --targets "$replicas" \
  --save "$work/prometheus-before.json"
took

step "h2oGPTe and openai clients against the compose gateway"
# The agent's code runs in the container's sandbox (the Landlock helper under Docker's seccomp
# profile): required, as on the host; DOCCHAT_CHECK_SANDBOX=auto makes it a loud skip instead.
DOCCHAT_CHECK_SANDBOX="${DOCCHAT_CHECK_SANDBOX:-required}" DOCCHAT_CHECK_REMOTE_MCP=off \
  "$python" tests/client_compat/check_h2ogpte_client.py "http://127.0.0.1:$port" "$key"
"$python" tests/client_compat/check_openai_client.py "http://127.0.0.1:$port" "$key"
# The client's own quickstart (PUT /rpc/fs, the chat WebSocket through the gateways to the chat
# replicas), its hostile uses and re-attach after a dropped connection, with a second gateway
# beside the compose one (as behind a load balancer; tests/compose/stack.py's, which faults.py
# uses too): the async quickstart and the re-attach go through it.
read -r gateway2 base2 < <("$python" -c 'import sys; sys.path.insert(0, "tests/compose"); import stack
stack.connect(sys.argv[1], sys.argv[2], sys.argv[3]); print(*stack.second_gateway())' \
  "http://127.0.0.1:$port" "$key" "docker compose -p $project -f $root/docker-compose.yml -f $root/tests/compose/compose.test.yml")
[ -n "${base2:-}" ] || { echo "the second gateway did not start" >&2; exit 1; }
quickstart=0
"$python" tests/client_compat/check_quickstart.py "http://127.0.0.1:$port" "$key" --second-base "$base2" || quickstart=$?
docker rm -f "$gateway2" >/dev/null
[ "$quickstart" = 0 ] || exit "$quickstart"
# docchat's MCP server through the compose gateway (each call to whichever chat and ingest
# replica it reaches: stateless), and the host's stdio bridge in front of it.
"$python" tests/client_compat/check_mcp_client.py "http://127.0.0.1:$port" "$key" \
  --stdio-command "$CARGO_TARGET_DIR/debug/gateway"
took

step "traces across the processes: an ingestion, a RAG completion and an agent run (OTLP)"
# The same check as the standalone run's, now with a process per service and RabbitMQ between
# them: each trace whole, and with spans from each process it crossed.
"$python" tests/client_compat/check_traces.py "http://127.0.0.1:$port" "$key" --processes \
  --receiver "http://$bridge:$(cat "$work/otlp.port")" --upstream "http://$bridge:$(cat "$work/upstream.port")"
took

step "Prometheus: the clients' load moved the counters, summed over the replicas; each replica's page"
"$python" tests/compose/check_prometheus.py "http://127.0.0.1:$prometheus_port" --targets "$replicas" \
  --since "$work/prometheus-before.json" --promtool "$(scripts/promtool.sh)"
took

# Schemathesis over the compose gateway (fewer examples than the standalone run: the same
# operations, now across the gRPC hops). Deleting API keys is left out and runs alone at the
# very end: with a key it created itself, the stateful phase can delete the key this script
# runs with (a correct 204), and everything after would get 401s (it did, once).
compose_schemathesis() {
  schemathesis "$python" "$work" "http://127.0.0.1:$port" "$key" "${DOCCHAT_COMPOSE_SCHEMATHESIS_EXAMPLES:-15}" "$1"
}

step "hostile input (tests/compose/hostile.py) and schemathesis against the compose gateway"
# B calling every route with A's ids, hostile uploads and malformed requests; then the
# interface description's generated requests. DOCCHAT_COMPOSE_HOSTILE=none skips both.
if [ "${DOCCHAT_COMPOSE_HOSTILE:-}" != none ]; then
  # shellcheck disable=SC2086 # a list of check names
  "$python" tests/compose/hostile.py "http://127.0.0.1:$port" "$key" \
    "docker compose -p $project -f $root/docker-compose.yml -f $root/tests/compose/compose.test.yml" ${DOCCHAT_COMPOSE_HOSTILE:-}
  # Also left out here: the direct model calls (POST /models/{model_name}/answer_question,
  # summarize_content, extract_data). Schemathesis finds the real model names and its examples
  # then run the compose stack's local CPU models for each, for tens of minutes; the standalone
  # run (scripts/test.sh clients) and check_quickstart.py cover them.
  compose_schemathesis '--exclude-name-regex=^(DELETE /api/v1/admin/api_keys/\{key_id\}|POST /api/v1/models/\{model_name\}/.*)$'
fi
took

step "faults on the topology (tests/compose/faults.py)"
# kill -9 of replicas mid-work, RabbitMQ and PostgreSQL restarts, SIGTERM under load (see the
# script's header); DOCCHAT_COMPOSE_FAULTS picks some ("none" skips them, e.g. for a quick local run).
faults="${DOCCHAT_COMPOSE_FAULTS:-}"
if [ "$faults" != none ]; then
  # shellcheck disable=SC2086 # a list of fault names
  "$python" tests/compose/faults.py "http://127.0.0.1:$port" "$key" \
    "docker compose -p $project -f $root/docker-compose.yml -f $root/tests/compose/compose.test.yml" $faults
fi
took

if [ -n "${DOCCHAT_COMPOSE_LOAD:-}" ]; then
  # Not a test: figures (bench/load/run.sh), with one and with two replicas of chat-service and
  # ingest-service; DOCCHAT_COMPOSE_LOAD_SECONDS long each (30).
  for n in 1 2; do
    step "load with $n replica(s) of chat- and ingest-service (bench/load/run.sh)"
    compose up -d --no-build --wait --wait-timeout 300 --scale chat-service=$n --scale ingest-service=$n >/dev/null
    bench/load/run.sh --url "http://127.0.0.1:$port" --key "$key" \
      --seconds "${DOCCHAT_COMPOSE_LOAD_SECONDS:-30}" --label "$n replica(s)"
    took
  done
fi

if [ "${DOCCHAT_COMPOSE_HOSTILE:-}" != none ]; then
  step "schemathesis: deleting API keys (last: it may delete the key used until now)"
  compose_schemathesis "--include-name=$DELETE_KEY"
  took
fi
