#!/usr/bin/env bash
# Replays the Alibaba openb GPU trace through the scheduling core (FGD
# methodology, demand = 1.3 x cluster GPU capacity) under the default policy
# and prints the result. Extra arguments go to `simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
trace="${HETEROFLOW_TRACE_DIR:-../shared/traces/alibaba-openb}"
exec ./build/heteroflow simulate \
  --nodes "$trace/openb_node_list_gpu_node.csv" \
  --pods "$trace/openb_pod_list_default.csv" \
  --method fgd --tune 1.3 --seed 42 "$@"
