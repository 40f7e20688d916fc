#!/usr/bin/env bash
# Checks the deployment files without building an image: the unit with systemd-analyze
# verify (any warning fails), and that ./dataservice is the static binary the Dockerfile
# copies into a scratch image. Run from .ci/run after ./build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v systemd-analyze >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
  else
    echo "systemd-analyze not found (Debian package systemd)"; exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# verify checks that ExecStart's binary exists: point it at the one just built.
sed "s|^ExecStart=/usr/local/bin/dataservice |ExecStart=$PWD/dataservice |" deploy/dataservice.service > "$tmp/dataservice.service"
grep -q "^ExecStart=$PWD/dataservice serve" "$tmp/dataservice.service"
out=$(systemd-analyze verify "$tmp/dataservice.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "systemd-analyze verify warnings:"; echo "$out"; exit 1
fi
echo "unit ok"

# A scratch image has no libc or loader: the binary must be statically linked.
if readelf -l dataservice | grep -q 'INTERP'; then
  echo "./dataservice is dynamically linked: the scratch image could not run it"; exit 1
fi
echo "binary static"
