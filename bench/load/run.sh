#!/usr/bin/env bash
# Load on the main API (issue 19): for a bounded time, three wrk clients at once against a
# running docchat, one per kind of traffic, each reporting its own figures:
#   reads    GET collections / documents / document count (4 connections)
#   rag      RAG completions on a session with a collection, over the scripted upstream (2)
#   uploads  PUT /uploads of a 20 KB file (1)
# Prints req/s, p50/p99 latency, non-2xx answers and socket errors per route.
#
#   bench/load/run.sh --url http://127.0.0.1:8080 --key <admin key> [--seconds 30] [--label x]
#
# The model `scripted` must exist (tests/client_compat/scripted_upstream.py behind it), as in
# the compose test; `DOCCHAT_COMPOSE_LOAD=1 scripts/compose-test.sh` runs this against the
# compose stack with one and with two replicas of chat- and ingest-service. wrk comes from
# Debian (installed when missing). Run alone: 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
url="" key="" seconds=30 label="run"
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url="${2%/}"; shift 2 ;;
    --key) key="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --label) label="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$url" ] && [ -n "$key" ] || { echo "usage: $0 --url URL --key KEY [--seconds N] [--label L]" >&2; exit 2; }
if ! command -v wrk >/dev/null; then
  apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends wrk >/dev/null; }
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A collection with a few ingested documents and a session on it.
session="$(python3 - "$url" "$key" <<'PY'
import json, sys, time, urllib.request
base, key = sys.argv[1], sys.argv[2]
def call(method, path, body=None, headers=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Authorization": f"Bearer {key}", **(headers or {})}
    if body is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(base + "/api/v1" + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(req, timeout=60) as r:
        text = r.read()
        return json.loads(text) if text else None
col = call("POST", "/collections", {"name": "load", "description": ""})
for i in range(5):
    boundary = "b0undary"
    text = (f"Survey {i}: the granite quarry near the harbour, copper beacons, willow meadows. " * 40).encode()
    raw = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"survey{i}.txt\"\r\n"
           "Content-Type: text/plain\r\n\r\n").encode() + text + f"\r\n--{boundary}--\r\n".encode()
    up = call("PUT", "/uploads", raw=raw, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    call("POST", f"/uploads/{up['id']}/ingest?collection_id={col['id']}")
deadline = time.time() + 120
while call("GET", f"/collections/{col['id']}")["document_count"] < 5:
    if time.time() > deadline:
        sys.exit("the load bench's documents were not ingested within 120 s")
    time.sleep(0.5)
print(call("POST", f"/chats?collection_id={col['id']}", {})["id"])
PY
)"

export DOCCHAT_KEY="$key" DOCCHAT_SESSION="$session"
wrk -t1 -c4 -d"${seconds}s" --timeout 30s --latency -s "$here/reads.lua" "$url" >"$work/reads.txt" &
wrk -t1 -c2 -d"${seconds}s" --timeout 30s --latency -s "$here/rag.lua" "$url" >"$work/rag.txt" &
wrk -t1 -c1 -d"${seconds}s" --timeout 30s --latency -s "$here/uploads.lua" "$url" >"$work/uploads.txt" &
wait

python3 - "$label" "$work" <<'PY'
import re, sys
label, work = sys.argv[1], sys.argv[2]
def ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]
print(f"\n{label}: route | req/s | p50 ms | p99 ms | requests | non-2xx | socket errors")
for route in ("reads", "rag", "uploads"):
    out = open(f"{work}/{route}.txt").read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = ms(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = ms(re.search(r"\s99%\s+(\S+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", out) or [0, 0])[1])
    errors = re.search(r"Socket errors: (.*)", out)
    print(f"{label}: {route} | {rps:.1f} | {p50:.1f} | {p99:.1f} | {total} | {non2xx} | {errors.group(1) if errors else 'none'}")
PY
