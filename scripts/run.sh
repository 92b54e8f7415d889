#!/usr/bin/env bash
# Runs HeteroFlow: builds, then starts the control-plane server on :3333 with
# its SQLite store under ./data and the demo cluster of examples/demo/server.yaml
# (two 8-GPU A100 nodes with RDMA, a 4-GPU T4 node, a CPU-only node). On a
# fresh data dir it submits the demo tasks, then a high-priority task that
# preempts a low-priority one, so there is something to look at at once.
# Ctrl-C stops the server; the data dir keeps everything for the next run.
#
# Environment: HETEROFLOW_LISTEN (default 0.0.0.0:3333), HETEROFLOW_DATA_DIR
# (default ./data), HETEROFLOW_ADMIN_TOKEN (admin token for a fresh data dir;
# generated and written to DATA_DIR/admin.token when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
listen="${HETEROFLOW_LISTEN:-0.0.0.0:3333}"
data="${HETEROFLOW_DATA_DIR:-./data}"
port="${listen##*:}"
base="http://127.0.0.1:$port"
fresh=1
[ -f "$data/heteroflow.db" ] && fresh=0

./build/heteroflow server --config examples/demo/server.yaml --listen "$listen" --data-dir "$data" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' INT TERM EXIT

for _ in $(seq 100); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "the server did not start" >&2; exit 1; }
  sleep 0.1
done

token="${HETEROFLOW_ADMIN_TOKEN:-}"
[ -z "$token" ] && [ -f "$data/admin.token" ] && token="$(cat "$data/admin.token")"
if [ "$fresh" = 1 ] && [ -n "$token" ]; then
  api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
  api -X POST "$base/api/v1/tasks/batch" --data-binary @examples/demo/tasks.json >/dev/null
  sleep 1
  api -X POST "$base/api/v1/tasks" --data-binary @examples/demo/urgent-task.json >/dev/null
  echo "submitted the demo tasks"
fi

cat <<MSG

HeteroFlow is running at $base  (API: $base/api/v1, metrics: $base/metrics)
The admin token is in $data/admin.token (or HETEROFLOW_ADMIN_TOKEN if you set it). Try:
  export HETEROFLOW_SERVER=$base HETEROFLOW_TOKEN=\$(cat $data/admin.token)
  build/heteroflow get nodes
  build/heteroflow get tasks
  curl -H "Authorization: Bearer \$HETEROFLOW_TOKEN" $base/api/v1/plugins
Ctrl-C stops it.
MSG
wait $server
