#!/usr/bin/env bash
# Runs `heteroflow simulate` on one openb pod list and checks the result with
# the independent checker (check_placements.py) and the JSON checker.
#
# usage: run_sim_variant.sh PYTHON HETEROFLOW NODES_CSV PODS_CSV METHOD [extra simulate flags...]
set -euo pipefail

python=$1 bin=$2 nodes=$3 pods=$4 method=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rc=0
"$bin" simulate --nodes "$nodes" --pods "$pods" --method "$method" \
  --output-placements "$work/placements.csv" --json "$@" >"$work/summary.json" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: heteroflow simulate exited $rc" >&2
  exit 1
fi

tune_args=()
if [[ $method == fgd ]]; then
  tune=1.3
  for ((i = 1; i <= $#; i++)); do
    if [[ ${!i} == --tune ]]; then
      j=$((i + 1))
      tune=${!j}
    fi
  done
  tune_args=(--tune "$tune")
fi

"$python" "$here/check_sim_json.py" "$work/summary.json" --method "$method"
"$python" "$here/check_placements.py" --nodes "$nodes" --pods "$pods" \
  --placements "$work/placements.csv" --summary "$work/summary.json" "${tune_args[@]}"
