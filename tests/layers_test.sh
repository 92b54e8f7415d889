#!/usr/bin/env bash
# The layering check (cmake/layers.cmake) passes on src/ and stops a
# configure at an upward include: a copy of src/ gets one planted per case,
# and the check must fail naming that file.
#   tests/layers_test.sh SOURCE_DIR
set -euo pipefail
root="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cmake -DHF_SRC="$root/src" -P "$root/cmake/layers.cmake" || { echo "FAIL: src/ itself breaks the layering" >&2; exit 1; }

plant() {  # plant FILE INCLUDE: expect the check to fail naming FILE
  local file="$1" include="$2"
  rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
  printf '#include "%s"\n' "$include" >>"$tmp/src/$file"
  if out="$(cmake -DHF_SRC="$tmp/src" -P "$root/cmake/layers.cmake" 2>&1)"; then
    echo "FAIL: $file including $include passed the check" >&2; exit 1
  fi
  grep -qF "src/$file: #include \"$include\"" <<<"$out" || {
    echo "FAIL: the check's message does not name src/$file:" >&2; echo "$out" >&2; exit 1; }
  echo "ok   $file including $include is refused"
}
plant core/status.cc framework/framework.h
plant scheduler/scheduler.cc server/control_plane.h
plant scheduler/scheduler.cc inference/service.h
plant http/server.cc server/auth.h
plant agent/agent.cc cli/api_session.h
plant inference/service.cc server/events.h
plant plugins/binpack/binpack.cc scheduler/scheduler.h

# A new folder must be placed in the table on purpose.
rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src" && mkdir "$tmp/src/extra"
if cmake -DHF_SRC="$tmp/src" -P "$root/cmake/layers.cmake" >/dev/null 2>&1; then
  echo "FAIL: a folder without a row passed the check" >&2; exit 1
fi
echo "ok   a folder without a row in HF_LAYERS is refused"

# And a real configure stops on a planted include (the check runs there).
rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
printf '#include "server/control_plane.h"\n' >>"$tmp/src/core/model.cc"
mkdir -p "$tmp/tree" && cp -r "$root/CMakeLists.txt" "$root/cmake" "$tmp/tree/" && mv "$tmp/src" "$tmp/tree/src"
if out="$(cmake -S "$tmp/tree" -B "$tmp/build" -DHF_BUILD_BENCH=OFF 2>&1)"; then
  echo "FAIL: cmake configured a tree whose core/ includes server/" >&2; exit 1
fi
grep -qF 'src/core/model.cc: #include "server/control_plane.h"' <<<"$out" || {
  echo "FAIL: the configure's error does not name the include:" >&2; echo "$out" | tail -20 >&2; exit 1; }
echo "ok   cmake -S refuses to configure a tree with an upward include"
echo "PASS: layering"
