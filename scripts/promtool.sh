#!/usr/bin/env bash
# Installs Debian's `prometheus` package when `promtool` is missing (the tests check the
# metrics pages, the alert rules and the scrape configuration with it; the compose test runs
# its Prometheus server) and prints promtool's path. Idempotent; scripts/test.sh calls it.
# Without root (or apt) it says what is missing and exits 1.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "promtool: missing (install Debian's prometheus package as root: apt-get install --no-install-recommends prometheus)" >&2
  exit 1
fi
echo "promtool: installing Debian's prometheus" >&2
export DEBIAN_FRONTEND=noninteractive
# The package's maintainer scripts would start a server under an init system; there is
# none to start it here, and policy-rc.d keeps it that way where there is.
if ! apt-get install -y --no-install-recommends prometheus >&2; then
  apt-get update >&2
  apt-get install -y --no-install-recommends prometheus >&2
fi
command -v promtool
