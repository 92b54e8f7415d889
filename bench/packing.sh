#!/usr/bin/env bash
# Packing quality on the openb trace, every variant and policy, seeds 42-51
# (bench/packing/run.py; docs/BENCHMARKS.md, "Packing"). A benchmark, not a
# test. usage: bench/packing.sh [BUILD_DIR] [run.py options]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
shift || true
exec python3 "$here/packing/run.py" "$build/heteroflow" --csv "${PACKING_CSV:-packing.csv}" "$@"
