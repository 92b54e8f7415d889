#!/usr/bin/env bash
# Clang's thread-safety analysis (core/mutex.h, scripts/thread-safety.sh)
# holds on the real annotations: a file of src/ compiles cleanly as it is,
# and a copy with one lock taken out fails, naming the member or the call.
#   tests/thread_safety_test.sh SOURCE_DIR
set -euo pipefail
root="$1"
command -v clang++ >/dev/null || { echo "FAIL: clang++ is not installed (scripts/install-deps.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror -DSPDLOG_FMT_EXTERNAL -DSPDLOG_COMPILED_LIB)

check() {  # check FILE: compiles with the analysis on
  clang++ "${flags[@]}" -I"$root/src" "$root/src/$1" || { echo "FAIL: src/$1 fails the analysis" >&2; exit 1; }
  echo "ok   src/$1 passes the analysis"
}

unlock() {  # unlock FILE FUNCTION MESSAGE: without the first lock in FUNCTION, the analysis says MESSAGE
  local file="$1" fn="$2" message="$3"
  rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
  # Drops the first "MutexLock lock(...);" after the line that defines FUNCTION.
  awk -v fn="$fn" 'index($0, fn) == 1 && !seen { seen = 1; armed = 1 }
    armed && /MutexLock lock\(/ { armed = 0; next } { print }' "$root/src/$file" >"$tmp/src/$file"
  if cmp -s "$root/src/$file" "$tmp/src/$file"; then echo "FAIL: no lock found in $fn" >&2; exit 1; fi
  if out="$(clang++ "${flags[@]}" -I"$tmp/src" "$tmp/src/$file" 2>&1)"; then
    echo "FAIL: $fn without its lock passed the analysis" >&2; exit 1
  fi
  grep -qF "$message" <<<"$out" || { echo "FAIL: expected \"$message\":" >&2; echo "$out" >&2; exit 1; }
  echo "ok   $fn without its lock: $message"
}

check scheduler/scheduler.cc
check scheduler/policy.cc
check server/events.cc
check store/store.cc
unlock scheduler/scheduler.cc "size_t Scheduler::active_count" "reading variable 'queue_' requires holding mutex 'mu_'"
unlock scheduler/scheduler.cc "Status Scheduler::Recover" "calling function 'RebuildLocked' requires holding mutex 'mu_'"
unlock scheduler/policy.cc "Status Scheduler::ChangePolicy" "requires holding mutex 'mu_'"
unlock server/events.cc "size_t EventHub::subscribers" "reading variable 'streams_' requires holding mutex 'mu_'"
unlock store/store.cc "Status Store::Write" "requires holding mutex 'mu_'"
