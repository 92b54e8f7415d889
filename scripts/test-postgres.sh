#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite (the store's tests on
# PostgreSQL, src/store/testing/postgres.h): initdb in DIR, listening only on
# a Unix socket in DIR, run as the postgres user when called as root.
# fsync is off (tests need no durability against power loss) unless
# HF_PG_FSYNC=on (the benchmarks').
#
# usage: scripts/test-postgres.sh start DIR   prints the server's URI
#        scripts/test-postgres.sh standby PRIMARY_DIR DIR
#                                  a hot standby of the server in PRIMARY_DIR,
#                                  streaming from it, synchronously (a commit
#                                  returns once the standby has it); prints its URI
#        scripts/test-postgres.sh promote DIR  makes the standby in DIR the primary
#        scripts/test-postgres.sh kill DIR     stops the server at once (as a crash)
#        scripts/test-postgres.sh stop DIR    stops it and removes DIR
set -euo pipefail
cmd=${1:?start, standby, promote, kill or stop} dir=${2:?a directory}
primary=""
if [ "$cmd" = standby ]; then primary=$dir dir=${3:?a directory}; fi
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
      -o "-k $dir -p 5432 -c listen_addresses='' -c fsync=${HF_PG_FSYNC:-off} -c max_connections=300" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://postgres@/?host=$dir&port=5432"
    ;;
  standby)
    "${as[@]}" "$bin/pg_basebackup" -h "$primary" -p 5432 -U postgres -D "$dir/data" -R -X stream -c fast \
      >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-k $dir -p 5432 -c listen_addresses='' -c fsync=off -c max_connections=300 -c hot_standby=on" \
      start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    # Synchronous: the primary acknowledges a commit once the standby has it.
    "${as[@]}" "$bin/psql" -X -q -h "$primary" -p 5432 -U postgres -d postgres \
      -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    echo "postgresql://postgres@/?host=$dir&port=5432"
    ;;
  promote)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -w promote >/dev/null
    ;;
  kill)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  stop)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|promote|kill|stop DIR, or $0 standby PRIMARY_DIR DIR" >&2
    exit 2
    ;;
esac
