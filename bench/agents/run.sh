#!/usr/bin/env bash
# Node-agent benchmark of `heteroflow server` and `heteroflow agent` (not a
# test; ctest never runs it).
#
#   bench/agents/run.sh [BINARY]        (default build/heteroflow)
#
# Each phase gets a fresh server (`heteroflow server --listen 127.0.0.1:0
# --data-dir $(mktemp -d)/...`, admin token from HETEROFLOW_ADMIN_TOKEN), and
# each agent a token bound to its node (POST /api/v1/tokens, in a 0600 file);
# every simulated node connects from loopback, so the per-address connection
# limit is off (--max-connections-per-address 0):
#   a. steady: AGENTS real `heteroflow agent` processes with declared
#      inventories (AGENTS nodes x GPUS A100s); bench/agents/e2e_agents.py
#      submits COUNT one-GPU tasks running TASK_CMD at RATE/s (one per
#      POST /api/v1/tasks) -> submit -> running latency p50/p90/p99/max (the
#      server's time of the "running" event), time until all ended.
#   b. burst: the same with the COUNT tasks sent as COUNT/BATCH
#      POST /api/v1/tasks/batch requests back to back.
#   c. heartbeats: bench/agents/heartbeat_load.py registers HB_NODES simulated
#      nodes over POST /api/v1/agent/register, holds POLLS assignment long
#      polls open and sends each node's heartbeat (with usage) every interval
#      for HB_DURATION s -> server CPU (utime+stime from /proc/PID/stat) per
#      heartbeat, heartbeats/s, heartbeat latency p50/p99. The server is pinned
#      to SERVER_CPUS and the load generator to LOAD_CPUS when taskset exists
#      and the machine has 2+ CPUs; a and b are not pinned.
# Everything started here (server, agents, the agents' task processes, temp
# dirs) is stopped and removed on exit, on failure and on Ctrl-C.
#
# Knobs (environment): AGENTS=4 GPUS=8 COUNT=1000 RATE=30 E2E_THREADS=4
#   BATCH=100 TASK_CMD='sleep 0.1' HB_NODES=1000 POLLS=1000 HB_DURATION=60
#   HB_INTERVAL=0 (0: what the server answers, 5 s) HB_CONNS=32
#   MAX_CONNECTIONS=4096 SERVER_CPUS=0 LOAD_CPUS=<last CPU> PHASES="a b c"
#   METRICS_OUT=PATH (the server's /metrics after phase a or b, in PATH.steady
#   or PATH.burst) E2E_PYTHON=1 (phases a and b with bench/agents/e2e_agents.py)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/heteroflow}"

AGENTS="${AGENTS:-4}" GPUS="${GPUS:-8}" COUNT="${COUNT:-1000}" RATE="${RATE:-30}"
E2E_THREADS="${E2E_THREADS:-4}" BATCH="${BATCH:-100}" TASK_CMD="${TASK_CMD:-sleep 0.1}"
HB_NODES="${HB_NODES:-1000}" POLLS="${POLLS:-1000}" HB_DURATION="${HB_DURATION:-60}"
HB_INTERVAL="${HB_INTERVAL:-0}" HB_CONNS="${HB_CONNS:-32}" MAX_CONNECTIONS="${MAX_CONNECTIONS:-4096}"
PHASES="${PHASES:-a b c}"
ncpu="$(nproc)"
SERVER_CPUS="${SERVER_CPUS:-0}" LOAD_CPUS="${LOAD_CPUS:-$((ncpu - 1))}"

command -v python3 >/dev/null || { echo "bench/agents/run.sh: python3 is not installed" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench/agents/run.sh: curl is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench/agents/run.sh: $bin is not an executable (build it: ninja -C build heteroflow)" >&2; exit 1; }

HF_TOKEN="hf_bench_admin_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
tmp="$(mktemp -d)"
(umask 077 && echo "$HF_TOKEN" >"$tmp/admin.token")
# The load generator of phases a and b: the native one built beside the
# binary (bench/agents/e2e_load.cc, hf_e2e_load), else the Python one, which
# measures the same but takes several times the CPU on the machine measured.
load=("$(dirname "$bin")/bench/hf_e2e_load")
[ -x "${load[0]}" ] || load=(python3 "$here/e2e_agents.py")
[ -n "${E2E_PYTHON:-}" ] && load=(python3 "$here/e2e_agents.py")
pid=""
port=""
agent_pids=()
work_dirs=()

# Kills what is left of the agents' tasks: each runs in its own process group,
# recorded in WORK_DIR/tasks/<id>/pid as "<pid> <start time>", and agents
# leave their tasks running when they stop (docs/AGENT.md).
kill_tasks() {
  local d f p
  for d in "${work_dirs[@]}"; do
    for f in "$d"/tasks/*/pid; do
      [ -f "$f" ] || continue
      read -r p _ <"$f" || continue
      if [ -n "$p" ]; then kill -KILL -- "-$p" 2>/dev/null || true; fi
    done
  done
}

stop_pid() {  # stop_pid PID NAME: SIGTERM, then SIGKILL after 10 s
  local p="$1"
  kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
  kill -TERM "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    echo "$2 $p did not exit 10 s after SIGTERM; killing it" >&2
    kill -KILL "$p" 2>/dev/null || true
  fi
  wait "$p" 2>/dev/null || true
}

stop_all() {
  local a
  for a in "${agent_pids[@]}"; do stop_pid "$a" agent; done
  agent_pids=()
  kill_tasks
  work_dirs=()
  if [ -n "$pid" ]; then stop_pid "$pid" server; fi
  pid=""
}
cleanup() { trap - INT TERM; stop_all; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME [PIN]: fresh data dir, waits for the port and /readyz,
# creates an agent token (in $agent_token).
start_server() {
  local dir="$tmp/$1" pin=()
  mkdir -p "$dir"
  if [ -n "${2:-}" ]; then pin=(taskset -c "$2"); fi
  HETEROFLOW_ADMIN_TOKEN="$HF_TOKEN" "${pin[@]}" "$bin" server --listen 127.0.0.1:0 \
    --data-dir "$dir/data" --max-connections "$MAX_CONNECTIONS" \
    --max-connections-per-address 0 >"$dir/stdout" 2>"$dir/stderr" &
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
}

# start_agents NAME: AGENTS agents with declared inventories; waits until
# their nodes are Ready.
start_agents() {
  local dir="$tmp/$1" i
  python3 "$here/cluster.py" inventories "$dir/inv" "$AGENTS" "$GPUS"
  for i in $(seq 0 $((AGENTS - 1))); do
    mkdir -p "$dir/agent-$i"
    work_dirs+=("$dir/agent-$i")
    python3 "$here/cluster.py" agent-token "$port" "$HF_TOKEN" "bench-a$i" "$dir/agent-$i.token"
    "$bin" agent --server "http://127.0.0.1:$port" --token-file "$dir/agent-$i.token" \
      --inventory "$dir/inv/agent-$i.yaml" --work-dir "$dir/agent-$i" \
      >"$dir/agent-$i.log" 2>&1 &
    agent_pids+=("$!")
  done
  python3 "$here/cluster.py" ready "$port" "$HF_TOKEN" "$AGENTS" 30
}

e2e_phase() {  # e2e_phase steady|burst
  start_server "$1"
  start_agents "$1"
  "${load[@]}" --port "$port" --token-file "$tmp/admin.token" --mode "$1" --count "$COUNT" \
    --rate "$RATE" --threads "$E2E_THREADS" --batch "$BATCH" --command "$TASK_CMD" | tee "$tmp/$1.txt"
  if [ -n "${METRICS_OUT:-}" ]; then
    curl -fs -H "Authorization: Bearer $HF_TOKEN" "http://127.0.0.1:$port/metrics" >"$METRICS_OUT.$1" || true
  fi
  stop_all
}

echo "heteroflow node-agent benchmark: $bin"
echo "machine: $ncpu CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1); data dir on $(df -P "$tmp" | awk 'NR==2 {print $1}')"

if [[ " $PHASES " == *" a "* ]]; then
  echo
  echo "== a. submit -> running, $AGENTS agents x $GPUS GPUs, $COUNT tasks '$TASK_CMD' at $RATE/s =="
  e2e_phase steady
fi
if [[ " $PHASES " == *" b "* ]]; then
  echo
  echo "== b. submit -> running, $COUNT tasks as $((COUNT / BATCH)) batches of $BATCH, back to back =="
  e2e_phase burst
fi
if [[ " $PHASES " == *" c "* ]]; then
  echo
  pin_server="" pin_load=()
  if command -v taskset >/dev/null && [ "$ncpu" -ge 2 ]; then
    pin_server="$SERVER_CPUS"
    pin_load=(taskset -c "$LOAD_CPUS")
  fi
  echo "== c. heartbeats: $HB_NODES simulated agents, $POLLS long polls, ${HB_DURATION} s" \
       "(server on CPUs ${pin_server:-any}, load generator on ${LOAD_CPUS:-any}) =="
  [ -n "$pin_server" ] || echo "(not pinned: no taskset, or a single CPU)"
  start_server heartbeat "$pin_server"
  # One client speaks for every simulated node: the admin token may act for
  # any node (an agent token acts for its own only).
  "${pin_load[@]}" python3 "$here/heartbeat_load.py" --port "$port" --token "$HF_TOKEN" \
    --server-pid "$pid" --nodes "$HB_NODES" --polls "$POLLS" --duration "$HB_DURATION" \
    --interval "$HB_INTERVAL" --conns "$HB_CONNS" --gpus "$GPUS" | tee "$tmp/hb.txt"
  stop_all
fi

echo
echo "== summary =="
for f in steady burst; do
  if [ -f "$tmp/$f.txt" ]; then
    echo "submit -> running ($f): $(grep '^AGENTS_E2E ' "$tmp/$f.txt" | sed 's/^AGENTS_E2E //')"
  fi
done
if [ -f "$tmp/hb.txt" ]; then
  echo "heartbeats: $(grep '^AGENTS_HB ' "$tmp/hb.txt" | sed 's/^AGENTS_HB //')"
fi
