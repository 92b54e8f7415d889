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
# One PostgreSQL server for the store's tests on that backend, for the whole
# run (each test makes a database of its own on it).
pg_dir=$(mktemp -d /tmp/hf-pg-XXXXXX)
trap './scripts/test-postgres.sh stop "$pg_dir"' EXIT
HF_TEST_POSTGRES=$(./scripts/test-postgres.sh start "$pg_dir")
export HF_TEST_POSTGRES
ctest --test-dir build --output-on-failure -j"$jobs" "$@"
