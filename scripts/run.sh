#!/usr/bin/env bash
# Runs HeteroFlow: builds, then starts the control-plane server on :3333 with
# its SQLite store under ./data and the policy of examples/demo/server.yaml,
# plus five local agents whose declared inventories (examples/demo/agents/)
# make the demo cluster: two 8-GPU A100 nodes with RDMA, a 4-GPU T4 node, a
# 4-NPU Huawei Ascend node, a CPU-only node. Tasks run as real processes under DATA_DIR/agents/<node>/.
# It submits the demo tasks, then a high-priority task that preempts a
# running low-priority one, deploys a chat model (examples/demo/model.json;
# its replicas run the small OpenAI-compatible stand-in model server of
# tests/inference/) behind an endpoint named "chat", and submits a 2-node job
# whose ranks rendezvous over TCP (examples/demo/job.json), so there is
# something to look at at once.
#
# Ctrl-C ends the demo's work through the API (scripts/demo_end.py: the chat
# endpoint and model deleted, every job and live task cancelled, their
# processes waited for), then stops the agents and the server. The data dir
# keeps the store, its history and the tokens: the next start on it ends
# whatever an unclean stop left the same way, then submits the demo anew.
# --fresh deletes the data dir first.
#
# --ha runs the control plane as three replicas (ports 3333, 3334, 3335) on a
# local PostgreSQL (docs/HA.md): one leads, the others relay to it, and the
# agents know all three. Kill the leader (see `curl :3333/readyz`) and watch
# another take over. PostgreSQL's files live in HETEROFLOW_PG_DIR (default
# /var/tmp/heteroflow-demo-pg-UID), reachable only by a Unix socket there.
#
# usage: scripts/run.sh [--fresh] [--ha]
# Environment: HETEROFLOW_LISTEN (default 0.0.0.0:3333), HETEROFLOW_DATA_DIR
# (default ./data), HETEROFLOW_ADMIN_TOKEN (admin token for a fresh data dir;
# generated and written to DATA_DIR/admin.token when unset), HETEROFLOW_BINARY
# (run this heteroflow instead of building ./build/heteroflow).
set -euo pipefail
cd "$(dirname "$0")/.."
fresh_start=0
ha=0
for arg in "$@"; do
  case "$arg" in
    --fresh) fresh_start=1 ;;
    --ha) ha=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $arg (usage: scripts/run.sh [--fresh] [--ha])" >&2; exit 2 ;;
  esac
done
bin="${HETEROFLOW_BINARY:-./build/heteroflow}"
[ -n "${HETEROFLOW_BINARY:-}" ] || ./scripts/build.sh
listen="${HETEROFLOW_LISTEN:-0.0.0.0:3333}"
data="${HETEROFLOW_DATA_DIR:-./data}"
port="${listen##*:}"
base="http://127.0.0.1:$port"
if [ "$fresh_start" = 1 ] && [ -e "$data" ]; then
  # Only a data dir of this script's making is deleted.
  if [ ! -f "$data/heteroflow.db" ] && [ ! -f "$data/ha" ]; then
    echo "run.sh: --fresh: $data is not a HeteroFlow data dir (no heteroflow.db); not deleting it" >&2
    exit 2
  fi
  rm -rf "$data"
fi
fresh=1
[ -f "$data/heteroflow.db" ] && fresh=0
[ "$ha" = 1 ] && [ -f "$data/ha" ] && fresh=0

(umask 077 && mkdir -p "$data/agents")
work="$(cd "$data/agents" && pwd)"
# The server and agents of an earlier run whose script was killed outright
# (no trap ran) still hold the port and the store: they stop first.
pids="$data/run.pids"
if [ -f "$pids" ]; then
  for pid in $(cat "$pids"); do
    argv="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)"
    case "$argv" in
      *"$(basename "$bin") "*"$data"*)
        echo "stopping process $pid, left running by an earlier run" >&2
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true ;;
    esac
  done
  rm -f "$pids"
fi
# The server and the agents run in sessions of their own: the terminal's
# Ctrl-C reaches this script only, whose trap ends the demo's work through
# them before it stops them.
servers=()
if [ "$ha" = 0 ]; then
  setsid "$bin" server --config examples/demo/server.yaml --listen "$listen" --data-dir "$data" &
  servers+=($!)
else
  pg_dir="${HETEROFLOW_PG_DIR:-/var/tmp/heteroflow-demo-pg-$(id -u)}"
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  as=()
  (umask 077 && mkdir -p "$pg_dir")
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$pg_dir"; as=(runuser -u postgres --); fi
  if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
    "${as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --locale=C \
      > "$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; exit 1; }
  fi
  # Only a Unix socket in a folder of the caller's (mode 0700).
  "${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w \
    -o "-k $pg_dir -c listen_addresses=''" status >/dev/null 2>&1 ||
    "${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w \
      -o "-k $pg_dir -c listen_addresses=''" start >/dev/null
  pg="postgresql://postgres@/postgres?host=$pg_dir"
  if [ "$fresh" = 1 ] || [ "$fresh_start" = 1 ]; then
    PGOPTIONS="-c client_min_messages=warning" psql -X -q "$pg" \
      -c "DROP DATABASE IF EXISTS heteroflow WITH (FORCE)" -c "CREATE DATABASE heteroflow"
  fi
  touch "$data/ha"
  store="postgresql://postgres@/heteroflow?host=$pg_dir"
  # One admin token for the three replicas: whichever leads first stores it.
  if [ -z "${HETEROFLOW_ADMIN_TOKEN:-}" ]; then
    [ -s "$data/admin.token" ] ||
      (umask 077 && echo "hf_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" > "$data/admin.token")
    HETEROFLOW_ADMIN_TOKEN="$(cat "$data/admin.token")"
    export HETEROFLOW_ADMIN_TOKEN
  fi
  host="${listen%:*}"
  urls=()
  for i in 0 1 2; do
    setsid "$bin" server --config examples/demo/server.yaml --listen "$host:$((port + i))" \
      --data-dir "$data/replica-$i" --store "$store" --replica "replica-$i" \
      > "$data/replica-$i.log" 2>&1 &
    servers+=($!)
    urls+=("http://127.0.0.1:$((port + i))")
  done
fi
server=${servers[0]}
printf '%s\n' "${servers[@]}" > "$pids"
agents=()
stopping=0
stop_all() {
  [ "$stopping" = 1 ] && return
  stopping=1
  if [ "$ha" = 1 ]; then
    # Any live replica will do (a follower relays to the leader).
    for i in "${!servers[@]}"; do
      if kill -0 "${servers[$i]}" 2>/dev/null; then server=${servers[$i]} base=${urls[$i]}; break; fi
    done
  fi
  if [ -n "${token:-}" ] && kill -0 $server 2>/dev/null && [ ${#agents[@]} -gt 0 ]; then
    echo "ending the demo's work..." >&2
    HETEROFLOW_TOKEN="$token" python3 scripts/demo_end.py "$base" --work-dir "$work" ||
      echo "run.sh: the demo's work did not end cleanly (see above)" >&2
  fi
  [ ${#agents[@]} -gt 0 ] && kill -TERM "${agents[@]}" 2>/dev/null
  # Agents leave their tasks running when they stop (so that a restarted
  # agent finds them): whatever did not end through the API goes with them.
  for d in /proc/[0-9]*; do
    case "$(readlink "$d/cwd" 2>/dev/null)" in "$work"/*) kill -TERM "${d#/proc/}" 2>/dev/null ;; esac
  done
  kill -TERM "${servers[@]}" 2>/dev/null
  wait 2>/dev/null
  if [ "$ha" = 1 ]; then "${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1; fi
  rm -f "$pids"
}
trap stop_all INT TERM EXIT

for _ in $(seq 100); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "the server did not start" >&2; exit 1; }
  sleep 0.1
done

token="${HETEROFLOW_ADMIN_TOKEN:-}"
[ -z "$token" ] && [ -f "$data/admin.token" ] && token="$(cat "$data/admin.token")"
api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }

# One agent token per node (role agent, bound to that node: it can act for
# no other), made once with the admin token, kept 0600 in DATA_DIR and handed
# to the agent as a file, never on its command line.
agent_servers="$base"
if [ "$ha" = 1 ]; then agent_servers="$(IFS=,; echo "${urls[*]}")"; fi
nodes=()
for inv in examples/demo/agents/*.yaml; do
  case "$inv" in *-usage.yaml) continue ;; esac
  nodes+=("$(basename "$inv" .yaml)")
done
if [ -n "$token" ]; then
  for name in "${nodes[@]}"; do
    [ -s "$data/agent-$name.token" ] && continue
    (umask 077 && api -X POST "$base/api/v1/tokens" \
       -d "{\"name\":\"demo-agent-$name\",\"role\":\"agent\",\"node\":\"$name\"}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' > "$data/agent-$name.token")
  done
fi
if [ -s "$data/agent-${nodes[0]}.token" ]; then
  for name in "${nodes[@]}"; do
    setsid "$bin" agent --server "$agent_servers" --token-file "$data/agent-$name.token" \
      --inventory "examples/demo/agents/$name.yaml" --work-dir "$work/$name" \
      > "$data/agents/$name.log" 2>&1 &
    agents+=($!)
    echo $! >> "$pids"
  done
  for _ in $(seq 100); do
    [ "$(api "$base/api/v1/nodes" | grep -o '"condition":"Ready"' | wc -l)" -ge ${#nodes[@]} ] && break
    sleep 0.1
  done
else
  echo "no admin token: set HETEROFLOW_ADMIN_TOKEN to start the demo agents" >&2
fi

if [ "$fresh" = 0 ] && [ -n "$token" ]; then
  # Whatever an unclean stop left (a killed script, a lost terminal) ends
  # first: its tasks read cancelled, and the demo below starts anew.
  HETEROFLOW_TOKEN="$token" python3 scripts/demo_end.py "$base" --work-dir "$work" ||
    echo "run.sh: the earlier run's work did not end cleanly (see above)" >&2
fi
if [ -n "$token" ]; then
  api -X POST "$base/api/v1/tasks/batch" --data-binary @examples/demo/tasks.json >/dev/null
  sleep 2
  api -X POST "$base/api/v1/tasks" --data-binary @examples/demo/urgent-task.json >/dev/null
  sed "s|@MODEL_SERVER@|$PWD/tests/inference/fake_model.py|" examples/demo/model.json |
    api -X POST "$base/api/v1/inference/models" --data-binary @- >/dev/null
  (umask 077 && api -X POST "$base/api/v1/inference/endpoints" -d '{"name":"chat","model":"qwen-7b-chat"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"]["secret"])' > "$data/chat.key")
  # A 2-node job whose ranks rendezvous over TCP at MASTER_ADDR:MASTER_PORT.
  sed "s|@RENDEZVOUS@|$PWD/examples/demo/rendezvous.py|" examples/demo/job.json |
    api -X POST "$base/api/v1/jobs" --data-binary @- >/dev/null
  echo "submitted the demo tasks and the job ddp-rendezvous, and deployed qwen-7b-chat behind the endpoint \"chat\""
fi

cat <<MSG

HeteroFlow is running at $base  (API: $base/api/v1, metrics: $base/metrics)${urls:+
Replicas: ${urls[*]}: curl any of them at /readyz to see who leads (docs/HA.md)}
The admin token is in $data/admin.token (or HETEROFLOW_ADMIN_TOKEN if you set it). Try:
  export HETEROFLOW_SERVER=$base HETEROFLOW_TOKEN=\$(cat $data/admin.token)
  build/heteroflow get nodes
  build/heteroflow get tasks
  build/heteroflow get jobs
  build/heteroflow describe job 1
  build/heteroflow logs 1
  curl -H "Authorization: Bearer \$HETEROFLOW_TOKEN" $base/api/v1/plugins
  curl $base/inference/v1/chat/completions -H "Authorization: Bearer \$(cat $data/chat.key)" \\
       -d '{"model": "chat", "messages": [{"role": "user", "content": "hello"}], "stream": true}'
Ctrl-C ends the demo's work and stops it; the next start on $data submits the
demo anew (--fresh starts on an empty data dir).
MSG
if [ "$ha" = 0 ]; then
  wait $server
else
  # Until no replica is left: one killed (to see another take over) is not the end.
  while :; do
    alive=0
    for pid in "${servers[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 1
  done
fi
