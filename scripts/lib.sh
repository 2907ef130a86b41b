# Shared by scripts/test.sh and scripts/compose-test.sh (sourced, not run): the repository
# root and build settings, step headers, a free port, the scripted upstream the client checks
# talk to, and schemathesis over a running gateway.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The Python checks' PASS lines as they happen, not at exit: a run cut off by CI's time limit
# shows which check it was in.
export PYTHONUNBUFFERED=1
export DOCCHAT_TEST_MODELS_DIR="${DOCCHAT_TEST_MODELS_DIR:-$HOME/.cache/docchat/models}"

# Each header says when it began, counted from the first script's start (so the compose
# test's steps inside test.sh's run count from the same zero): CI has a time limit.
export DOCCHAT_TEST_T0="${DOCCHAT_TEST_T0:-$(date +%s)}"
step() { printf '\n==> %s  [%s]\n' "$*" "$(elapsed)"; }
elapsed() { local s=$(( $(date +%s) - DOCCHAT_TEST_T0 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_upstream PYTHON DIR LISTEN_HOST URL_HOST: the scripted OpenAI-compatible upstream
# (tests/client_compat/scripted_upstream.py) listening on LISTEN_HOST, and DIR/models.toml
# naming it as the tool-calling model `scripted` at URL_HOST. Sets $upstream to its pid.
start_upstream() {
  local python="$1" dir="$2" listen="$3" host="$4"
  "$python" tests/client_compat/scripted_upstream.py "$listen" >"$dir/upstream.port" &
  upstream=$!
  for _ in $(seq 1 50); do [ -s "$dir/upstream.port" ] && break; sleep 0.1; done
  [ -s "$dir/upstream.port" ] || { echo "the scripted upstream did not start" >&2; return 1; }
  cat >"$dir/models.toml" <<MODELS
[[models]]
name = "scripted"
display_name = "Scripted"
base_model = "scripted-base"
# An OpenAI-compatible upstream that calls tools (the agent checks).
tools = true
base_url = "http://$host:$(cat "$dir/upstream.port")/v1"

# The same upstream as a vision and reasoning model: the client's capability lists.
[[models]]
name = "scripted-eyes"
display_name = "Scripted with eyes"
base_model = "scripted-base"
vision = true
reasoning = true
base_url = "http://$host:$(cat "$dir/upstream.port")/v1"
MODELS
  chmod 0644 "$dir/models.toml"
}

# schemathesis PYTHON DIR URL KEY EXAMPLES FILTER: the interface description's generated
# requests (valid and invalid) against the gateway at URL; no answer may be a 5xx or disagree
# with the document. FILTER is an --include-name/--exclude-name option: deleting API keys runs
# alone and last, since the stateful phase may delete the very key the run uses (a correct
# 204 that turns everything after it into a 401).
schemathesis() {
  local python="$1" dir="$2" url="$3" key="$4" examples="$5" filter="$6"
  (cd "$dir" && "$(dirname "$python")/schemathesis" run "$url/api-spec.yaml" "$filter" \
    -H "Authorization: Bearer $key" --max-examples "$examples" --request-timeout 30 --no-color \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance)
}
DELETE_KEY='DELETE /api/v1/admin/api_keys/{key_id}'
