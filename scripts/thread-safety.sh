#!/usr/bin/env bash
# Builds every library of src/ with clang's thread-safety analysis and
# -Werror (-DHF_THREAD_SAFETY=ON) into build/thread-safety: a member read
# without the mutex it is GUARDED_BY, or a call without the mutex it
# REQUIRES, fails the build (core/mutex.h). The tests run on the g++ build.
#
# usage: scripts/thread-safety.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/thread-safety
cmake -S . -B "$out" -G Ninja -DHF_THREAD_SAFETY=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DHF_BUILD_BENCH=OFF >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$out" -j"$jobs" --target hf_core hf_framework hf_plugins hf_store hf_http \
  hf_leader hf_scheduler hf_inference hf_server hf_sim hf_cli hf_agent
echo "thread-safety: every library builds with -Wthread-safety -Werror"
