#!/usr/bin/env bash
# Inference gateway benchmark (not a test; ctest never runs it): the latency
# the gateway adds, its requests/s through one endpoint, and a streamed
# answer's time to first byte, each beside the same request sent straight to
# the replica.
#
#   bench/inference/run.sh [BINARY]        (default build/heteroflow)
#
# Needs python3 and the bench binaries built beside BINARY
# (BUILD/bench/hf_http_load, BUILD/bench/hf_echo_replica; the script builds
# them with ninja when BUILD has a build.ninja, as HF_BUILD_BENCH is on by
# default). Method, knobs and the processes it starts: gateway_bench.py's
# docstring and docs/BENCHMARKS.md, "Inference gateway". Everything it starts
# (server, agent, replicas, temp dir) is removed on exit, failure and Ctrl-C.
#
# Knobs (environment): N=2000 WARMUP=200 CONCURRENCY="1 8 32 64" DURATION=5
#   STREAM_N=200 REPLICAS2=1 ECHO_THREADS=2 QUICKACK=0 KEEP= (1: keep the temp dir)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/heteroflow}"
build="$(cd "$(dirname "$bin")" && pwd)"

command -v python3 >/dev/null || { echo "bench/inference/run.sh: python3 is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench/inference/run.sh: $bin is not an executable (build it: ninja -C build heteroflow)" >&2; exit 1; }
if [ -f "$build/build.ninja" ] && command -v ninja >/dev/null; then
  ninja -C "$build" "$(basename "$bin")" hf_http_load hf_echo_replica >/dev/null
fi
for b in hf_http_load hf_echo_replica; do
  [ -x "$build/bench/$b" ] || { echo "bench/inference/run.sh: $build/bench/$b is missing (configure with -DHF_BUILD_BENCH=ON and build it)" >&2; exit 1; }
done

echo "heteroflow inference gateway benchmark: $bin"
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
exec python3 "$here/gateway_bench.py" --binary "$bin" --http-load "$build/bench/hf_http_load" \
  --echo-replica "$build/bench/hf_echo_replica" ${KEEP:+--keep}
