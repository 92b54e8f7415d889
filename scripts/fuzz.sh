#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, ASan and UBSan into
# build/fuzz, then runs each: first the saved crash inputs in
# fuzz/regressions/<target>/ (each must pass), then the fuzzer itself for the
# given time from the seed corpus fuzz/corpus/<target>/, keeping what it
# finds in build/fuzz/corpus/<target>/.
#
# usage: scripts/fuzz.sh [--seconds N] [--build-only | --no-build] [TARGET...]
#   --seconds N   how long each target runs (default 60)
#   --build-only  build, run nothing
#   --no-build    run what is built (ctest does: scripts/test.sh built it)
#   TARGET        api_json http_request policy_yaml inventory_yaml nvidia_smi vendor_smi
#                 openb_csv workload_yaml manifest (default: all)
# A crash stops the run with exit status 1 and leaves the input in
# build/fuzz/artifacts/<target>/; once fixed, it goes into
# fuzz/regressions/<target>/ so it is replayed from then on.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build=1
run=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-only) run=0; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(api_json http_request policy_yaml inventory_yaml nvidia_smi vendor_smi openb_csv workload_yaml manifest)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -f "fuzz/${t}_fuzz.cc" ] || { echo "fuzz.sh: no target $t (${all[*]})" >&2; exit 2; }
done

out=build/fuzz
if [ "$build" = 1 ]; then
  ./scripts/install-deps.sh
  cmake -S . -B "$out" -G Ninja -DHF_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  jobs=$(nproc 2>/dev/null || echo 2)
  cmake --build "$out" -j"$jobs" --target "${targets[@]/#/hf_fuzz_}"
fi
[ "$run" = 1 ] || exit 0

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${targets[@]}"; do
  bin="$out/fuzz/hf_fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (run without --no-build)" >&2; exit 1; }
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "$out/logs"
  log="$out/logs/$t.log"
  shopt -s nullglob
  saved=(fuzz/regressions/"$t"/*)
  shopt -u nullglob
  if [ ${#saved[@]} -gt 0 ]; then
    if ! "$bin" "${saved[@]}" >"$log" 2>&1; then
      tail -n 40 "$log" >&2
      echo "fuzz.sh: $t: a saved crash input fails again (log: $log)" >&2
      exit 1
    fi
  fi
  if ! "$bin" "$out/corpus/$t" "fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$t/" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: $t: the fuzzer found a failure; the input is in $out/artifacts/$t/" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  echo "fuzz: $t: ${seconds} s, ${execs:-?} inputs, ${cov:-?} coverage points, no failure" \
       "(${#saved[@]} saved inputs replayed)"
done
