#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests: initdb in a new temp dir, run by
# an unprivileged user (the postgres system user Debian's package creates, or the
# calling user when it is not root), listening on a Unix socket in that dir and on
# 127.0.0.1 at a free port. Prints the cluster's URL on stdout; the caller stops it with
#   pg_ctl -D DIR stop   (DIR is printed on stderr).
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "postgres.sh: PostgreSQL is not installed (apt-get install -y postgresql)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/dataservice-pg.XXXXXX)
run=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  run=(runuser -u postgres --)
fi
port=${PGPORT_TEST:-$(( 20000 + RANDOM % 20000 ))}
"${run[@]}" "$bin/initdb" -D "$dir/data" -U dataservice --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
# Settings for a test cluster: no durability (throwaway), enough connections for the
# parallel tests of several packages.
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB" start >&2 ||
  { cat "$dir/server.log" >&2; exit 1; }
echo "postgres.sh: cluster in $dir (stop: $bin/pg_ctl -D $dir/data stop)" >&2
echo "postgres://dataservice@127.0.0.1:$port/postgres?sslmode=disable"
