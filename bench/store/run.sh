#!/usr/bin/env bash
# One server on SQLite and on PostgreSQL, side by side (not a test; ctest
# never runs it): bench/api/run.sh's submission phases on each store, then a
# table of both with PostgreSQL's share of SQLite's figure.
#
#   bench/store/run.sh [BINARY]        (default build/heteroflow)
#
# Rows: single submissions (POST /api/v1/tasks, wrk -c32), batch submissions
# (POST /api/v1/tasks/batch, 100 tasks per request, wrk -c8), and decisions
# committed per second (placements the scheduler committed during the batch
# phase and its settling, over that time). Both stores fsync each commit
# (PostgreSQL runs with fsync on, on the same disk). The scheduler's own
# decision speed does not involve the store (bench/run.sh, hf_bench).
# Knobs: those of bench/api/run.sh (DURATION=10s, NODES, GPUS, ...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/heteroflow}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for store in sqlite postgresql; do
  STORE=$store PHASES="b bb" "$root/bench/api/run.sh" "$bin" | tee "$tmp/$store.txt"
done
python3 - "$tmp/sqlite.txt" "$tmp/postgresql.txt" "${DURATION:-10s}" <<'PY'
import re, sys

def figures(path, duration):
    text = open(path).read()
    single = re.search(r"POST /api/v1/tasks \(-c\d+\)\s+([\d.]+) tasks", text)
    batch = re.search(r"POST /api/v1/tasks/batch x\d+ \(-c\d+\)\s+([\d.]+) tasks.*?scheduled=(\d+) pending=\d+ settle_s=([\d.]+)", text)
    secs = float(duration.rstrip("s"))
    return {
        "single submissions/s": float(single.group(1)),
        "batch submissions/s (x100)": float(batch.group(1)),
        "decisions committed/s": int(batch.group(2)) / (secs + float(batch.group(3))),
    }

lite, pg = figures(sys.argv[1], sys.argv[3]), figures(sys.argv[2], sys.argv[3])
print()
print("== one server, SQLite vs PostgreSQL ==")
print("%-30s %12s %12s %10s" % ("measure", "SQLite", "PostgreSQL", "PG/SQLite"))
for k in lite:
    print("%-30s %12.0f %12.0f %9.0f%%" % (k, lite[k], pg[k], 100 * pg[k] / lite[k]))
PY
