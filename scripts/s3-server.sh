#!/usr/bin/env bash
# An S3-compatible server for the tests' blob stores, on 127.0.0.1:5439: the server mode of
# PyPI's `moto` (in memory; each test makes its own bucket), in a virtualenv of its own
# (made by scripts/python-env.sh) so its pins never meet the client venv's. Idempotent: does nothing when the port already answers.
# Prints the endpoint URL.
#
#   scripts/s3-server.sh          # start (or reuse) and print the URL
#   scripts/s3-server.sh stop
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
port="${DOCCHAT_S3_PORT:-5439}"
venv="${DOCCHAT_S3_VENV:-$HOME/.cache/docchat/venv-s3}"
req="$root/tests/s3/requirements.txt"
log="${DOCCHAT_S3_LOG:-/var/tmp/docchat-s3.log}"
pidfile="${DOCCHAT_S3_PIDFILE:-/var/tmp/docchat-s3.pid}"
url="http://127.0.0.1:$port"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ "${1:-}" = stop ]; then
  [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
  exit 0
fi

if port_open "$port"; then
  echo "$url"
  exit 0
fi

python="$(DOCCHAT_VENV="$venv" DOCCHAT_VENV_REQUIREMENTS="$req" "$root/scripts/python-env.sh")"
nohup "$(dirname "$python")/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
echo $! >"$pidfile"
for _ in $(seq 1 60); do
  port_open "$port" && { echo "$url"; exit 0; }
  sleep 0.5
done
echo "the S3 server did not come up; see $log" >&2
exit 1
