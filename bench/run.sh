#!/usr/bin/env bash
# Prints HeteroFlow's benchmark figures in one run:
#   1. decisions/s and p50/p99 decision latency on 1k/5k/10k-node clusters
#      built from the openb node shapes, all plugins enabled (hf_bench);
#   2. the openb FGD-methodology run (tune 1.3) for each policy: wall time of
#      the whole command (incl. reading the CSVs), decisions/s, and GPU
#      allocation at arrived 100% averaged over seeds 42-51;
#   3. the speed targets table, each measure against its target
#      (bench/targets.sh; TARGETS=0 skips it).
# 1 and 2 pinned to one core (taskset -c 0) when taskset exists.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
trace="${HETEROFLOW_TRACE_DIR:-../shared/traces/alibaba-openb}"
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"

echo "== scheduling core at scale: every node examined =="
$pin ./build/bench/hf_bench --trace-dir "$trace" --percentage 100
echo
echo "== scheduling core at scale: default node sampling (every node up to 5,000, then 5%) =="
$pin ./build/bench/hf_bench --trace-dir "$trace"

echo
echo "== openb default trace, --method fgd --tune 1.3 (1,213 nodes, 6,212 GPUs) =="
printf '%-12s %-6s %10s %12s %12s %12s %12s\n' policy seed wall_s decisions/s p99_us alloc@100 alloc@final
for policy in binpack binpack-gpu spread; do
  sum=0
  for seed in 42 43 44 45 46 47 48 49 50 51; do
    start=$(date +%s.%N)
    out=$($pin ./build/heteroflow simulate --nodes "$trace/openb_node_list_gpu_node.csv" \
      --pods "$trace/openb_pod_list_default.csv" --method fgd --tune 1.3 --seed "$seed" \
      --policy "examples/policies/$policy.yaml" --json)
    end=$(date +%s.%N)
    python3 - "$policy" "$seed" "$start" "$end" "$out" <<'PY'
import json, sys
policy, seed, start, end, out = sys.argv[1:]
r = json.loads(out)
print(f"{policy:<12} {seed:<6} {float(end) - float(start):10.3f} {r['decisions_per_second']:12.0f} "
      f"{r['decision_latency_us']['p99']:12.1f} {100 * r['gpu_alloc_ratio_at_arrived_100']:11.2f}% "
      f"{100 * r['gpu_alloc_ratio_final']:11.2f}%")
PY
    a=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["gpu_alloc_ratio_at_arrived_100"])' "$out")
    sum=$(python3 -c "print($sum + $a)")
  done
  python3 -c "print(f'{\"$policy\":<8} mean of seeds 42-51: GPU allocation at arrived 100% = {100 * $sum / 10:.2f}%')"
done

if [ "${TARGETS:-1}" = 1 ]; then
  echo
  bench/targets.sh build
fi
