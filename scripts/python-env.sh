#!/usr/bin/env bash
# Creates (once) the virtualenv the checks use (tests/requirements.txt: the h2ogpte and openai
# clients, schemathesis, mcp, the manifest checks, bench/quality, bench/ocr and the OCR test
# fixtures' generator), from PyPI.
# Prints the venv's python path. DOCCHAT_VENV / DOCCHAT_VENV_REQUIREMENTS name another venv
# and its requirements file (scripts/s3-server.sh keeps moto in one of its own).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${DOCCHAT_VENV:-$HOME/.cache/docchat/venv}"
req="${DOCCHAT_VENV_REQUIREMENTS:-$root/tests/requirements.txt}"
stamp="$venv/.requirements"
# Tests call this concurrently (nextest runs them in parallel): one creates, the others wait.
mkdir -p "$(dirname "$venv")"
exec 8>"$venv.lock"
flock 8
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! cmp -s "$req" "$stamp"; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  cp "$req" "$stamp"
fi
echo "$venv/bin/python"
