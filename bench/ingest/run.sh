#!/usr/bin/env bash
# End-to-end ingestion throughput in standalone mode (release build, in-process MiniLM):
# pages/s for a 200-page text PDF and MB/s for plain text, from upload to searchable.
# Usage: bench/ingest/run.sh   (run alone: 2 cores)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docchat/target}"
models="${DOCCHAT_MODELS_DIR:-$HOME/.cache/docchat/models}"
scripts/fetch-models.sh "$models" >/dev/null
cargo build --release --locked -p docchat-server --bin gateway >/dev/null 2>&1
work="$(mktemp -d)"
trap 'kill $gw 2>/dev/null || true; rm -rf "$work"' EXIT
python3 bench/ingest/make_pdf.py 200 "$work/report.pdf"
python3 - "$work/text.txt" <<'PY'
import random, sys
rng = random.Random(7)
words = "retrieval grounded answers documents collections chunks embeddings latency throughput memory rivers proteins compilers forecasts".split()
with open(sys.argv[1], "w") as f:
    while f.tell() < 5_000_000:
        f.write(" ".join(rng.choice(words) for _ in range(14)).capitalize() + ".\n")
PY
port=18765
key=sk-bench-ingest
DOCCHAT_MODELS_DIR="$models" DOCCHAT_DATA_DIR="$work/data" DOCCHAT_HTTP_ADDR="127.0.0.1:$port" \
  DOCCHAT_BOOTSTRAP_ADMIN_KEY="$key" RUST_LOG=warn "$CARGO_TARGET_DIR/release/gateway" --standalone &
gw=$!
base="http://127.0.0.1:$port/api/v1"
auth="Authorization: Bearer $key"
for _ in $(seq 1 100); do curl -fs -H "$auth" "http://127.0.0.1:$port/rpc/health/readiness" >/dev/null && break; sleep 0.2; done

ingest() { # file -> seconds from upload start to the document being indexed
  local file="$1"
  local col; col=$(curl -fs -H "$auth" -H 'content-type: application/json' -d '{"name":"bench","description":""}' "$base/collections" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
  local t0; t0=$(date +%s.%N)
  local up; up=$(curl -fs -X PUT -H "$auth" -F "file=@$file" "$base/uploads" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
  curl -fs -X POST -H "$auth" "$base/uploads/$up/ingest?collection_id=$col" >/dev/null
  # Polled with curl and grep only, 5 times a second: a python3 started 20 times a second
  # (through pyenv's shims) took a third of the 2 cores away from the ingestion it timed.
  until curl -fs -H "$auth" "$base/collections/$col" | grep -q '"document_count": *1[,}]'; do sleep 0.2; done
  echo "$(date +%s.%N) - $t0" | bc
}
pdf_s=$(ingest "$work/report.pdf")
txt_s=$(ingest "$work/text.txt")
mb=$(python3 -c "import os;print(os.path.getsize('$work/text.txt')/1e6)")
printf 'ingestion (standalone, release, MiniLM in-process, %s cores, load %s)\n' "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
printf '  200-page text PDF : %6.2f s  -> %6.1f pages/s\n' "$pdf_s" "$(echo "200 / $pdf_s" | bc -l)"
printf '  %.1f MB plain text : %6.2f s  -> %6.3f MB/s\n' "$mb" "$txt_s" "$(echo "$mb / $txt_s" | bc -l)"
