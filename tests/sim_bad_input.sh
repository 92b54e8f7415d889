#!/usr/bin/env bash
# Bad input to `heteroflow simulate` must exit 2 with a message on stderr that
# names the file and, for a bad row or entry, the line.
#
# usage: sim_bad_input.sh HETEROFLOW CASE
set -uo pipefail

bin=$1 case=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

node_header='sn,cpu_milli,memory_mib,gpu,model'
pod_header='name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time'
printf '%s\nn0,64000,262144,2,T4\nn1,32000,131072,0,\n' "$node_header" >"$work/nodes.csv"
good_pod='p0,1000,1024,1,500,T4,LS,Running,0,100,0'
printf '%s\n%s\n' "$pod_header" "$good_pod" >"$work/pods.csv"

nodes=$work/nodes.csv pods=$work/pods.csv
args=()
want_rc=2
want_text=()
case $case in
  missing_file)
    pods=$work/no-such-pods.csv
    want_text=("$pods")
    ;;
  malformed_row)
    printf '%s\n%s\np1,1000,1024,1\n' "$pod_header" "$good_pod" >"$work/pods.csv"
    want_text=("$work/pods.csv:3:" "fields")
    ;;
  unknown_column)
    printf '%s,colour\n%s,red\n' "$pod_header" "$good_pod" >"$work/pods.csv"
    want_text=("$work/pods.csv:1:" "unknown column 'colour'")
    ;;
  negative_request)
    printf '%s\n%s\np1,-1000,1024,1,500,,BE,Running,0,100,0\n' "$pod_header" "$good_pod" >"$work/pods.csv"
    want_text=("$work/pods.csv:3:" "cpu_milli")
    ;;
  non_integer)
    printf '%s\np1,1000,1.5,1,500,,BE,Running,0,100,0\n' "$pod_header" >"$work/pods.csv"
    want_text=("$work/pods.csv:2:" "memory_mib")
    ;;
  bad_node_row)
    printf '%s\nn0,64000,262144,2,T4\nn1,32000,131072,two,\n' "$node_header" >"$work/nodes.csv"
    want_text=("$work/nodes.csv:3:" "gpu")
    ;;
  gpu_milli_too_large)
    printf '%s\np1,1000,1024,1,1500,,BE,Running,0,100,0\n' "$pod_header" >"$work/pods.csv"
    want_text=("$work/pods.csv:2:" "gpu_milli")
    ;;
  replay_without_times)
    printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n' >"$work/pods.csv"
    args=(--method replay)
    want_text=("$work/pods.csv" "creation")
    ;;
  gangs_out_of_range)
    args=(--method replay --gangs 1.5)
    want_text=("--gangs" "[0, 1]")
    ;;
  gangs_without_replay)
    args=(--gangs 0.2)
    want_text=("--gangs needs --method replay")
    ;;
  bad_gang_sizes)
    args=(--method replay --gangs 0.2 --gang-sizes 2:0.5,1:0.5)
    want_text=("--gang-sizes" "1:0.5" "2..1024")
    ;;
  bad_tune)
    args=(--tune -1)
    want_text=("--tune")
    ;;
  unknown_method)
    args=(--method magic)
    want_text=("magic")
    ;;
  unknown_flag)
    args=(--no-such-flag)
    want_text=("no-such-flag")
    ;;
  no_input)
    nodes='' pods=''
    want_text=("--workload")
    ;;
  bad_policy)
    printf 'plugins:\n  binpack: {enabled: true}\n  spread: {enabled: true}\n' >"$work/policy.yaml"
    args=(--policy "$work/policy.yaml")
    want_text=("$work/policy.yaml" "spread")
    ;;
  bad_yaml_workload)
    printf 'nodes:\n  - name: a\n    cpu_milli: 1000\n    gpus:\n      - {index: 0, model: T4, memroy_mib: 1}\ntasks: []\n' \
      >"$work/w.yaml"
    nodes='' pods=''
    args=(--workload "$work/w.yaml")
    want_text=("$work/w.yaml:5:" "memroy_mib")
    ;;
  bad_queueing)
    args=(--method replay --queueing fair,lottery)
    want_text=("--queueing" "lottery")
    ;;
  bad_backfill)
    args=(--method replay --backfill maybe)
    want_text=("--backfill" "maybe")
    ;;
  bad_teams)
    nodes='' pods=''
    args=(--generate teams --teams a:1,b:0)
    want_text=("--teams" "b:0" "weight")
    ;;
  bad_cluster)
    nodes='' pods=''
    args=(--generate teams --cluster 8x0)
    want_text=("--cluster" "8x0")
    ;;
  teams_with_fgd)
    nodes='' pods=''
    args=(--generate teams --method fgd)
    want_text=("--generate teams needs --method replay")
    ;;
  unknown_queue)
    printf 'nodes: [{name: a, cpu_milli: 1000, memory_mib: 1024}]
queues: [{name: team-a}]
tasks:
  - {name: t, queue: team-b}
' \
      >"$work/w.yaml"
    nodes='' pods=''
    args=(--workload "$work/w.yaml" --method replay)
    want_text=("$work/w.yaml:4" "queue team-b is not in queues:")
    ;;
  bad_queue_tree)
    printf 'nodes: [{name: a, cpu_milli: 1000, memory_mib: 1024}]
queues:
  - {name: team-a, guaranteed: {gpu: {A100: 8}}, max: {gpu: {A100: 4}}}
' \
      >"$work/w.yaml"
    nodes='' pods=''
    args=(--workload "$work/w.yaml" --method replay)
    want_text=("$work/w.yaml:3" "queues.team-a.max.gpu.A100" "below")
    ;;
  *)
    echo "unknown case $case" >&2
    exit 1
    ;;
esac

cmd=("$bin" simulate)
[[ -n $nodes ]] && cmd+=(--nodes "$nodes" --pods "$pods")
cmd+=("${args[@]}")
"${cmd[@]}" >"$work/stdout" 2>"$work/stderr"
rc=$?
fail=0
if [[ $rc -ne $want_rc ]]; then
  echo "FAIL: exit code $rc, expected $want_rc" >&2
  fail=1
fi
for t in "${want_text[@]}"; do
  if ! grep -qF -- "$t" "$work/stderr"; then
    echo "FAIL: stderr does not mention '$t'" >&2
    fail=1
  fi
done
if [[ $fail -ne 0 ]]; then
  echo "--- command: ${cmd[*]}" >&2
  echo "--- stderr:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
echo "OK: $case -> exit $rc: $(head -c 300 "$work/stderr")"
