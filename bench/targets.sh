#!/usr/bin/env bash
# Prints the speed targets table: each measure run now, next to its target,
# with "met" or "NOT met". Called by bench/run.sh (TARGETS=0 skips it);
# runs alone too:
#
#   bench/targets.sh [BINARY_DIR]      (default build; build it first)
#
# Rows:
#   1. 10k openb-shaped nodes (the openb GPU node list repeated), demand =
#      capacity (`simulate --method fgd --tune 1.0`), preempt running; and
#      the same with preempt disabled, for reference
#   2. hf_bench --nodes 10000 --fill 1.1 (over-demand: preemption)
#   3. hf_bench --nodes 10000 (fill 0.9)
#   4. hf_bench at 1k and 50k nodes: cost growth (log-log slope) and 50k rate
#      (default percentage_of_nodes_to_score: 50k nodes are sampled), and
#      the packing of the sampled scan next to the full scan at 10k nodes
#   5. single task submissions, 32 clients (bench/api/run.sh phase b)
#   6. end to end with 8 real agents, `true` tasks, one per POST at 500/s
#      (bench/agents/run.sh phase a)
#   7. GET /api/v1/plugins, wrk -t2 -c32 (bench/api/run.sh phase a)
#   8. p99.9 of the 10k-node decisions (row 3's run)
# The scheduling rows are pinned to one core (taskset -c 0) when taskset
# exists; the API and agents rows are not (server, clients and agents share
# the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
trace="${HETEROFLOW_TRACE_DIR:-../shared/traces/alibaba-openb}"
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

row() {  # measure, now, target, met (0/1)
  local verdict="NOT met"
  [ "$4" = 1 ] && verdict="met"
  printf '%-58s | %-40s | %-34s | %s\n' "$1" "$2" "$3" "$verdict"
}
# hf_bench's result row for NODES [FILL]: nodes decisions placed per_s p50 p99 p999 max evicted
hfbench() {
  local fill="${2:-0.9}"
  $pin "$bin/bench/hf_bench" --trace-dir "$trace" --nodes "$1" --fill "$fill" | awk -v n="$1" '$1 == n'
}
ge() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2"; }
le() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }

python3 - "$trace/openb_node_list_gpu_node.csv" > "$tmp/nodes10k.csv" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
print(rows[0])
for i in range(10000):
    print(",".join(["n-%05d" % i] + rows[1 + i % (len(rows) - 1)].split(",")[1:]))
PY
printf 'plugins:\n  binpack: {enabled: true, weight: 1}\n  preempt: {enabled: true, mode: running, min_runtime_seconds: 0}\n' > "$tmp/running.yaml"
printf 'plugins:\n  binpack: {enabled: true, weight: 1}\n  preempt: {enabled: true, mode: disabled}\n' > "$tmp/disabled.yaml"
sim() {
  $pin "$bin/heteroflow" simulate --nodes "$tmp/nodes10k.csv" --pods "$trace/openb_pod_list_default.csv" \
    --method fgd --tune 1.0 --policy "$tmp/$1.yaml" --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin); print("%.0f %.1f %d" % (r["decisions_per_second"], r["decision_latency_us"]["p99"], r["preemptions"]))'
}

echo "== speed targets =="
printf '%-58s | %-40s | %-34s | %s\n' measure now target verdict

read -r rate p99 pre < <(sim running)
read -r off_rate off_p99 _ < <(sim disabled)
row "10k nodes, fgd tune 1.0, preempt running" "$rate/s, p99 ${p99} us, $pre preemptions" \
  ">= 20,000/s, p99 <= 2,000 us" "$(ge "$rate" 20000 && le "$p99" 2000 && echo 1 || echo 0)"
row "  (same, preempt disabled)" "$off_rate/s, p99 ${off_p99} us" "reference" 1

read -r _ _ _ rate _ p99 _ _ evicted < <(hfbench 10000 1.1)
row "hf_bench --nodes 10000 --fill 1.1" "$rate/s, p99 ${p99} us, $evicted evicted" \
  ">= 20,000/s, p99 <= 2,000 us" "$(ge "$rate" 20000 && le "$p99" 2000 && echo 1 || echo 0)"

read -r _ _ _ rate10k _ p99_10k p999_10k _ _ < <(hfbench 10000)
row "hf_bench --nodes 10000 (fill 0.9)" "$rate10k/s, p99 ${p99_10k} us" \
  ">= 50,000/s, p99 < 500 us" "$(ge "$rate10k" 50000 && le "$p99_10k" 499.99 && echo 1 || echo 0)"

read -r _ _ _ rate1k _ _ _ _ _ < <(hfbench 1000)
read -r _ _ _ rate50k _ _ _ _ _ < <(hfbench 50000)
slope=$(python3 -c "import math, sys; a, b = map(float, sys.argv[1:]); print('%.2f' % (math.log(a / b) / math.log(50)))" "$rate1k" "$rate50k")
row "cost growth 1k -> 50k nodes (sampled above 5k)" "slope $slope, $rate50k/s at 50k" \
  ">= 20,000/s at 50k nodes" "$(ge "$rate50k" 20000 && echo 1 || echo 0)"

# Packing of the sampled scan next to the full scan: openb default pods on
# the 10k openb-shaped nodes, binpack, seeds 42-51, GPU allocation at
# arrived 100% (bench/sampling/run.py; PACKING=0 skips it).
if [ "${PACKING:-1}" != 0 ]; then
  read -r full auto < <(python3 bench/sampling/run.py --bin "$bin/heteroflow" --trace-dir "$trace" \
    --sizes 10000 --percentages 100,0 --seeds 42-51 | awk '$1 == 10000 {v[$2] = $3} END {print v["100"], v["auto"]}')
  row "  packing, sampled vs full scan (10k, seeds 42-51)" "${auto}% vs ${full}% alloc@100" \
    ">= full scan - 0.1 point" "$(ge "$auto" "$(python3 -c "print($full - 0.1)")" && echo 1 || echo 0)"
fi

api="$(PHASES="a b" bench/api/run.sh "$bin/heteroflow" 2>&1)" || true
sub=$(printf '%s\n' "$api" | sed -n 's/^POST \/api\/v1\/tasks (-c[0-9]*) *\([0-9.]*\) tasks.*/\1/p' | head -1)
row "single task submissions, 32 clients" "${sub:-?}/s" ">= 5,000/s, acked after fsync" \
  "$(ge "${sub:-0}" 5000 && echo 1 || echo 0)"

# Exactly the target: one task per POST at 500/s (phase a only). The rate
# achieved is the submissions' (2000 over the time they took, open loop);
# it counts as sustained when every task ran, the last ended within 1 s of
# the last submission (the cluster kept up), and the client held the rate
# within 1% (its last POST is answered just after 3.998 s: 2000 / 4.01 s
# reads 499/s).
agents="$(PHASES=a AGENTS=8 TASK_CMD=true COUNT=2000 RATE=500 E2E_THREADS=8 bench/agents/run.sh "$bin/heteroflow" 2>&1)" || true
steady=$(printf '%s\n' "$agents" | sed -n 's/^submit -> running (steady): //p')
val() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
s_ran=$(val "$steady" ran); s_sub=$(val "$steady" submit_s); s_done=$(val "$steady" all_done_s)
s_p99=$(val "$steady" p99_ms)
read -r s_rate kept < <(python3 -c "
import sys
ran, sub, done = sys.argv[1:]
ok = bool(ran == '2000/2000' and sub and done and float(done) - float(sub) <= 1.0)
print('%.0f %d' % (2000 / float(sub) if sub else 0, ok))" "${s_ran:-}" "${s_sub:-}" "${s_done:-}")
row "end to end, 8 agents, true tasks, one per POST at 500/s" \
  "$s_rate tasks/s ($([ "$kept" = 1 ] && echo kept up || echo fell behind)), p99 ${s_p99:-?} ms" \
  ">= 500/s, submit->running p99 < 10 ms" \
  "$([ "$kept" = 1 ] && ge "$s_rate" 495 && le "${s_p99:-1e9}" 9.99 && echo 1 || echo 0)"

plugins=$(printf '%s\n' "$api" | sed -n 's/^GET \/api\/v1\/plugins (-c[0-9]*) *\([0-9.]*\) req.*/\1/p' | head -1)
row "GET /api/v1/plugins, wrk -t2 -c32" "${plugins:-?} req/s" ">= 35,000 req/s" \
  "$(ge "${plugins:-0}" 35000 && echo 1 || echo 0)"

row "p99.9 of decisions, 10k nodes (fill 0.9)" "${p999_10k} us" "< 1,000 us" \
  "$(le "$p999_10k" 999.99 && echo 1 || echo 0)"
