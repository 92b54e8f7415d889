#!/usr/bin/env bash
# Builds the Debian package of HeteroFlow (CPack, cmake/package.cmake) into
# build/packages/, after scripts/build.sh.
#
#   scripts/package.sh            build the .deb, print its path
#   scripts/package.sh --check    and check it as Debian's tools do (.ci/run):
#     1. lintian: no error (warnings are printed);
#     2. systemd-analyze security --offline on the server unit: exposure
#        <= 2.5 (printed);
#     3. dpkg -i; systemd-analyze verify on both installed units;
#        `heteroflow --version`; the server started as the heteroflow user,
#        with the unit's own command line on a free port and a temporary data
#        dir, answering /readyz;
#     4. dpkg --purge, and the user and folders the installation made are
#        removed again, so the machine is left as it was.
# The check installs a package: it needs root (or sudo), and refuses to run
# where a heteroflow package is installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: scripts/package.sh [--check]" >&2; exit 2 ;;
esac

./scripts/build.sh
(cd build && cpack -G DEB >/dev/null 2>&1) || (cd build && cpack -G DEB)
deb="$(ls build/packages/heteroflow_*.deb)"
echo "package: $deb ($(du -h "$deb" | cut -f1))"
[ "$check" = 1 ] || exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
for tool in lintian systemd-analyze dpkg-deb curl; do
  command -v "$tool" >/dev/null || { echo "package check: $tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
if dpkg-query -W -f='${Status}' heteroflow 2>/dev/null | grep -q "install ok installed"; then
  echo "package check: a heteroflow package is installed on this machine already; not touching it" >&2
  exit 1
fi

tmp="$(mktemp -d)"
pid=""
user_existed=0
getent passwd heteroflow >/dev/null && user_existed=1
dirs_before=""
for d in /var/lib/heteroflow /var/lib/heteroflow-agent; do [ -e "$d" ] && dirs_before="$dirs_before $d"; done
cleanup() {
  if [ -n "$pid" ]; then $SUDO kill "$pid" 2>/dev/null || true; fi
  if dpkg-query -W -f='${Status}' heteroflow 2>/dev/null | grep -q "installed"; then
    $SUDO dpkg --purge heteroflow >/dev/null || true
  fi
  for d in /var/lib/heteroflow /var/lib/heteroflow-agent; do
    [[ " $dirs_before " == *" $d "* ]] || $SUDO rm -rf "$d"
  done
  if [ "$user_existed" = 0 ] && getent passwd heteroflow >/dev/null; then
    $SUDO deluser --quiet --system heteroflow >/dev/null 2>&1 || true
    $SUDO delgroup --quiet --system heteroflow >/dev/null 2>&1 || true
  fi
  $SUDO rm -rf "$tmp"
}
trap cleanup EXIT

echo "== lintian =="
lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v "running with root privileges" | tee "$tmp/lintian.txt" || true
if grep -q "^E: " "$tmp/lintian.txt"; then
  echo "package check: lintian reports errors" >&2
  exit 1
fi
echo "lintian: $(grep -c '^E: ' "$tmp/lintian.txt" || true) errors, $(grep -c '^W: ' "$tmp/lintian.txt" || true) warnings"

echo "== systemd-analyze security (server unit) =="
mkdir "$tmp/root"
dpkg-deb -x "$deb" "$tmp/root"
systemd-analyze security --offline=true --root="$tmp/root" heteroflow-server.service >"$tmp/security.txt" 2>&1 || true
score="$(sed -n 's/.*Overall exposure level for heteroflow-server.service: \([0-9.]*\).*/\1/p' "$tmp/security.txt")"
[ -n "$score" ] || { cat "$tmp/security.txt" >&2; echo "package check: no exposure score" >&2; exit 1; }
echo "heteroflow-server.service exposure: $score (target <= 2.5)"
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || { echo "package check: exposure $score > 2.5" >&2; exit 1; }
systemd-analyze security --offline=true --root="$tmp/root" heteroflow-agent.service 2>&1 |
  sed -n 's/.*Overall exposure level for heteroflow-agent.service: /heteroflow-agent.service exposure (runs user tasks, docs\/OPERATIONS.md): /p'

echo "== dpkg -i =="
$SUDO dpkg -i "$deb" >"$tmp/dpkg.txt" 2>&1 || { cat "$tmp/dpkg.txt" >&2; exit 1; }
getent passwd heteroflow >/dev/null || { echo "package check: no heteroflow user after installation" >&2; exit 1; }
perm="$(stat -c '%a %U' /var/lib/heteroflow)"
[ "$perm" = "700 heteroflow" ] || { echo "package check: /var/lib/heteroflow is $perm, want 700 heteroflow" >&2; exit 1; }
for f in /etc/heteroflow/server.yaml /etc/heteroflow/agent.yaml; do
  grep -qx "$f" /var/lib/dpkg/info/heteroflow.conffiles || { echo "package check: $f is not a conffile" >&2; exit 1; }
done
# verify exits 0 on an unknown key; anything it says is a finding.
said="$(systemd-analyze verify /lib/systemd/system/heteroflow-server.service \
          /lib/systemd/system/heteroflow-agent.service 2>&1)" || true
[ -z "$said" ] || { echo "$said" >&2; echo "package check: systemd-analyze verify has findings" >&2; exit 1; }
echo "systemd-analyze verify: both units, nothing to say"
/usr/bin/heteroflow --version

echo "== the server as the heteroflow user =="
chmod 0711 "$tmp"  # the heteroflow user passes through to its data dir
$SUDO install -d -o heteroflow -g heteroflow -m 0700 "$tmp/data"
# The unit's command line, with the port and data dir changed.
cmd="$(sed -n '/^ExecStart=/,/[^\\]$/p' /lib/systemd/system/heteroflow-server.service | sed 's/^ExecStart=//; s/\\$//' | tr -s ' \n' ' ')"
cmd="${cmd/--data-dir \/var\/lib\/heteroflow/--data-dir $tmp/data}"
cmd="${cmd/--listen 0.0.0.0:3333/--listen 127.0.0.1:0}"
echo "running: $cmd"
# shellcheck disable=SC2086
$SUDO setpriv --reuid=heteroflow --regid=heteroflow --init-groups $cmd >"$tmp/server.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 100); do
  port="$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/server.log" | head -1)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log" >&2; echo "package check: the server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/server.log" >&2; echo "package check: no port" >&2; exit 1; }
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.1
done
ready="$(curl -fs "http://127.0.0.1:$port/readyz")" || { cat "$tmp/server.log" >&2; echo "package check: /readyz did not answer" >&2; exit 1; }
owner="$($SUDO stat -c '%U %a' "$tmp/data/admin.token")"
ui="$(curl -fs "http://127.0.0.1:$port/" | grep -c '<div id="app">' || true)"
echo "/readyz on port $port: $ready; admin.token: $owner; web UI from /usr/share/heteroflow/ui: $ui"
[ "$owner" = "heteroflow 600" ] || { echo "package check: admin.token is $owner" >&2; exit 1; }
[ "$ui" = 1 ] || { echo "package check: the installed server serves no web UI" >&2; exit 1; }
echo "package check: passed"
