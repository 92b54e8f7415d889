#!/usr/bin/env bash
# Runs the whole test suite: unit tests and end-to-end tests of the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
# The fuzz targets (clang, sanitizers) are a build of their own; ctest runs them.
./scripts/fuzz.sh --build-only
# Every library under clang's thread-safety analysis, warnings as errors.
./scripts/thread-safety.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs" "$@"
