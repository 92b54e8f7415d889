#!/usr/bin/env bash
# Runs `heteroflow simulate ... --json` and checks the JSON object.
#
# usage: sim_json.sh PYTHON HETEROFLOW SIMULATE_FLAGS... -- CHECK_SIM_JSON_FLAGS...
set -euo pipefail

python=$1 bin=$2
shift 2
sim_args=()
while [[ $# -gt 0 && $1 != -- ]]; do
  sim_args+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rc=0
"$bin" simulate "${sim_args[@]}" --json >"$work/summary.json" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: heteroflow simulate exited $rc" >&2
  exit 1
fi
lines=$(wc -l <"$work/summary.json")
if [[ $lines -ne 1 ]]; then
  echo "FAIL: --json printed $lines lines, expected one JSON object on one line" >&2
  exit 1
fi
"$python" "$here/check_sim_json.py" "$work/summary.json" "$@"
