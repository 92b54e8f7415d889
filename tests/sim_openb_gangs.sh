#!/usr/bin/env bash
# The openb trace with a fifth of its pods turned into jobs (--gangs 0.2),
# replayed on the trace's first 15 GPU nodes, where the jobs contend: with
# gangs no GPU is ever held by a partial gang; without (--no-gang) members
# hold GPUs waiting for mates that cannot fit, and jobs deadlock.
#
# usage: sim_openb_gangs.sh PYTHON HETEROFLOW NODES_CSV PODS_CSV
set -euo pipefail

python=$1 bin=$2 nodes=$3 pods=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 16 "$nodes" >"$work/nodes.csv"

run() {
  local out=$1
  shift
  "$bin" simulate --method replay --nodes "$work/nodes.csv" --pods "$pods" --gangs 0.2 \
    --seed 42 --json "$@" >"$work/$out.json"
}
run gang
run nogang --no-gang
# The same jobs either way (--gangs draws them from --seed alone).
"$python" "$here/check_sim_json.py" "$work/gang.json" --method replay --min jobs=300 \
  --eq gpu_seconds_held_by_partial_gangs=0 --eq jobs_partial_at_end=0
jobs=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"])' "$work/gang.json")
completed=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs_completed"])' "$work/gang.json")
"$python" "$here/check_sim_json.py" "$work/nogang.json" --method replay --eq jobs="$jobs" \
  --min jobs_partial_at_end=1 --min gpu_seconds_held_by_partial_gangs=1000 \
  --max jobs_completed=$((completed - 1))
partial=$("$python" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["jobs_completed"], "completed,", j["jobs_partial_at_end"], "holding part of their gang at the end,", round(j["gpu_seconds_held_by_partial_gangs"]), "GPU-seconds held by partial gangs")' "$work/nogang.json")
echo "PASS: $jobs jobs; with gangs $completed completed and none held partially; without: $partial"
