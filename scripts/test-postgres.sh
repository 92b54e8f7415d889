#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite (the store's tests on
# PostgreSQL, src/store/testing/postgres.h): initdb in DIR, listening only on
# a Unix socket in DIR, run as the postgres user when called as root.
#
# usage: scripts/test-postgres.sh start DIR   prints the server's URI
#        scripts/test-postgres.sh stop DIR    stops it and removes DIR
set -euo pipefail
cmd=${1:?start or stop} dir=${2:?a directory}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$dir"
  as=(runuser -u postgres --)
fi
case $cmd in
  start)
    "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-k $dir -p 5432 -c listen_addresses='' -c fsync=off -c max_connections=300" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://postgres@/?host=$dir&port=5432"
    ;;
  stop)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
