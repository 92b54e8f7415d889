#!/usr/bin/env bash
# REST API benchmark of `heteroflow server` (not a test; ctest never runs it).
#
#   bench/api/run.sh [BINARY]        (default build/heteroflow)
#
# Each phase gets a fresh server (`heteroflow server --listen 127.0.0.1:0
# --data-dir $(mktemp -d)/...`, admin token from HETEROFLOW_ADMIN_TOKEN) with
# NODES nodes x GPUS GPUs registered over POST /api/v1/nodes, so that one
# phase's tasks do not load the next:
#   a. wrk GET /api/v1/plugins                      -> requests/s, latency p50/p99
#   b. wrk POST /api/v1/tasks (bench/api/submit.lua) -> tasks/s, latency p50/p99
#      wrk POST /api/v1/tasks/batch, BATCH tasks per request -> tasks/s
#   c. bench/api/e2e_latency.py: submit -> "scheduled" event latency p50/p99/max
#   d. wrk GET /api/v1/tasks?limit=100 with READ_TASKS tasks stored -> requests/s
#      (every request reads the store)
#   e. wrk GET /livez with "Connection: close" -> requests/s (a new TCP
#      connection per request: the accept path)
# After b the script waits for the scheduler to empty its queue and prints
# how many tasks were scheduled. Nothing is pinned (see docs/BENCHMARKS.md).
#
# Knobs (environment): NODES=64 GPUS=8 THREADS=2 CONNS=32 DURATION=10s
#   BATCH=100 BATCH_CONNS=8 CPU_MILLI=100 GPU_MILLI=0 E2E_RATE=200
#   E2E_DURATION=10 E2E_THREADS=4 READ_TASKS=200 PHASES="a b bb c d e" (the
#   phases to run) STORE=sqlite (or postgresql: a PostgreSQL server started
#   by scripts/test-postgres.sh with fsync on, a fresh database per phase)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/heteroflow}"

NODES="${NODES:-64}" GPUS="${GPUS:-8}"
THREADS="${THREADS:-2}" CONNS="${CONNS:-32}" DURATION="${DURATION:-10s}"
BATCH="${BATCH:-100}" BATCH_CONNS="${BATCH_CONNS:-8}"
CPU_MILLI="${CPU_MILLI:-100}" GPU_MILLI="${GPU_MILLI:-0}"
E2E_RATE="${E2E_RATE:-200}" E2E_DURATION="${E2E_DURATION:-10}" E2E_THREADS="${E2E_THREADS:-4}"
READ_TASKS="${READ_TASKS:-200}" PHASES="${PHASES:-a b bb c d e}" STORE="${STORE:-sqlite}"

command -v wrk >/dev/null || { echo "bench/api/run.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/api/run.sh: python3 is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench/api/run.sh: $bin is not an executable (build it: ninja -C build heteroflow)" >&2; exit 1; }

HF_TOKEN="hf_bench_admin_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export HF_TOKEN
tmp="$(mktemp -d)"
pid=""
port=""

stop_server() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "server $pid did not exit 10 s after SIGTERM; killing it" >&2
      kill -KILL "$pid"
    fi
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
}
pg=""
pg_dir=""
cleanup() {
  stop_server
  [ -n "$pg_dir" ] && "$root/scripts/test-postgres.sh" stop "$pg_dir"
  rm -rf "$tmp"
}
trap cleanup EXIT
case "$STORE" in
  sqlite) ;;
  postgresql)
    pg_dir="$(mktemp -d /tmp/hf-bench-pg-XXXXXX)"
    pg="$(HF_PG_FSYNC=on "$root/scripts/test-postgres.sh" start "$pg_dir")" ;;
  *) echo "bench/api/run.sh: STORE is sqlite or postgresql, not $STORE" >&2; exit 2 ;;
esac
trap 'exit 130' INT TERM

# start_server NAME: fresh data dir, waits for the port, registers the cluster.
start_server() {
  local dir="$tmp/$1"
  mkdir -p "$dir"
  local store=()
  if [ -n "$pg" ]; then
    psql -X -q "$pg&dbname=postgres" -c "CREATE DATABASE bench_$1"
    store=(--store "$pg&dbname=bench_$1")
  fi
  HETEROFLOW_ADMIN_TOKEN="$HF_TOKEN" "$bin" server --listen 127.0.0.1:0 --data-dir "$dir/data" \
    "${store[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  pid=$!
  port=""
  for _ in $(seq 300); do
    port="$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$dir/stdout" | head -1)"
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "server exited at start:" >&2; cat "$dir/stdout" "$dir/stderr" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server printed no 'listening on' line in 30 s" >&2; exit 1; }
  for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
  python3 "$here/cluster.py" register "$port" "$HF_TOKEN" "$NODES" "$GPUS"
}

# phase NAME: whether NAME is one of PHASES.
phase() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# wrk_fields FILE: "req/s p50 p99 non2xx" from wrk --latency output.
wrk_fields() {
  awk '/Requests\/sec:/ {rps=$2}
       /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
       /Non-2xx or 3xx responses:/ {bad=$5}
       /Socket errors:/ {err=$0}
       END {printf "%s %s %s %s\n", rps, p50, p99, (bad == "" ? 0 : bad)}' "$1"
}

echo "heteroflow API benchmark: $bin"
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1); data dir on $(df -P "$tmp" | awk 'NR==2 {print $1}')"
echo "store: $STORE"
echo "cluster: $NODES nodes x $GPUS GPUs; wrk -t$THREADS -c$CONNS -d$DURATION; task: cpu_milli $CPU_MILLI, gpu_milli $GPU_MILLI"

if phase a; then
  echo; echo "== a. GET /api/v1/plugins =="
  start_server plugins
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $HF_TOKEN" \
    "http://127.0.0.1:$port/api/v1/plugins" | tee "$tmp/a.txt"
  stop_server
  read -r a_rps a_p50 a_p99 a_bad < <(wrk_fields "$tmp/a.txt")
fi

if phase b; then
  echo; echo "== b. POST /api/v1/tasks, one task per request =="
  start_server submit
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$here/submit.lua" \
    "http://127.0.0.1:$port" -- 0 "$CPU_MILLI" "$GPU_MILLI" | tee "$tmp/b.txt"
  b_settle="$(python3 "$here/cluster.py" settle "$port" "$HF_TOKEN")"
  echo "after the run: $b_settle"
  stop_server
  read -r b_rps b_p50 b_p99 b_bad < <(wrk_fields "$tmp/b.txt")
fi

if phase bb; then
  echo; echo "== b'. POST /api/v1/tasks/batch, $BATCH tasks per request =="
  start_server batch
  wrk -t"$THREADS" -c"$BATCH_CONNS" -d"$DURATION" --latency -s "$here/submit.lua" \
    "http://127.0.0.1:$port" -- "$BATCH" "$CPU_MILLI" "$GPU_MILLI" | tee "$tmp/bb.txt"
  bb_settle="$(python3 "$here/cluster.py" settle "$port" "$HF_TOKEN")"
  echo "after the run: $bb_settle"
  stop_server
  read -r bb_rps bb_p50 bb_p99 bb_bad < <(wrk_fields "$tmp/bb.txt")
  bb_tps="$(python3 -c "print(f'{float(\"$bb_rps\") * $BATCH:.0f}')")"
fi

if phase c; then
  echo; echo "== c. submit -> scheduled, $E2E_RATE/s for $E2E_DURATION s from $E2E_THREADS threads =="
  start_server e2e
  python3 "$here/e2e_latency.py" --port "$port" --token "$HF_TOKEN" --rate "$E2E_RATE" \
    --duration "$E2E_DURATION" --threads "$E2E_THREADS" --cpu-milli "$CPU_MILLI" \
    --gpu-milli "$GPU_MILLI" | tee "$tmp/c.txt"
  stop_server
  e2e="$(grep '^E2E ' "$tmp/c.txt" | sed 's/^E2E //')"
fi

if phase d; then
  echo; echo "== d. GET /api/v1/tasks?limit=100, $READ_TASKS tasks stored =="
  start_server reads
  python3 "$here/cluster.py" submit "$port" "$HF_TOKEN" "$READ_TASKS"
  python3 "$here/cluster.py" settle "$port" "$HF_TOKEN" >/dev/null
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $HF_TOKEN" \
    "http://127.0.0.1:$port/api/v1/tasks?limit=100" | tee "$tmp/d.txt"
  stop_server
  read -r d_rps d_p50 d_p99 d_bad < <(wrk_fields "$tmp/d.txt")
fi

if phase e; then
  echo; echo "== e. GET /livez, a new connection per request =="
  start_server accept
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Connection: close" \
    "http://127.0.0.1:$port/livez" | tee "$tmp/e.txt"
  stop_server
  read -r e_rps e_p50 e_p99 e_bad < <(wrk_fields "$tmp/e.txt")
fi

echo
echo "== summary =="
printf '%-44s %12s %10s %10s %s\n' "phase" "per second" "p50" "p99" "notes"
phase a && printf '%-44s %12s %10s %10s %s\n' "GET /api/v1/plugins (-c$CONNS)" "$a_rps req" "$a_p50" "$a_p99" "non-2xx $a_bad"
phase b && printf '%-44s %12s %10s %10s %s\n' "POST /api/v1/tasks (-c$CONNS)" "$b_rps tasks" "$b_p50" "$b_p99" "non-2xx $b_bad; $b_settle"
phase bb && printf '%-44s %12s %10s %10s %s\n' "POST /api/v1/tasks/batch x$BATCH (-c$BATCH_CONNS)" "$bb_tps tasks" "$bb_p50" "$bb_p99" "$bb_rps req/s; non-2xx $bb_bad; $bb_settle"
phase d && printf '%-44s %12s %10s %10s %s\n' "GET /api/v1/tasks?limit=100 (-c$CONNS)" "$d_rps req" "$d_p50" "$d_p99" "non-2xx $d_bad; $READ_TASKS tasks stored"
phase e && printf '%-44s %12s %10s %10s %s\n' "GET /livez, Connection: close (-c$CONNS)" "$e_rps req" "$e_p50" "$e_p99" "non-2xx $e_bad"
phase c && echo "submit -> scheduled event: $e2e"
true
