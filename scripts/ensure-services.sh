#!/usr/bin/env bash
# Makes sure the real backends the tests use are up: PostgreSQL on 127.0.0.1:5432 and
# RabbitMQ on 127.0.0.1:5672, starting them when they are installed but stopped.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 5432; then
  echo "starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if ! port_open 5672; then
  echo "starting RabbitMQ" >&2
  rabbitmq-server -detached
fi
for _ in $(seq 1 60); do
  if port_open 5432 && port_open 5672; then
    rabbitmqctl await_startup >/dev/null 2>&1 || true
    exit 0
  fi
  sleep 1
done
echo "PostgreSQL or RabbitMQ did not come up" >&2
exit 1
