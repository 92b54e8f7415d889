#!/usr/bin/env bash
# Installs the Debian bookworm packages HeteroFlow needs to build, test and run.
# Does nothing when everything is already present, so the README's commands can
# call it on every run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libsqlite3-dev libpq-dev postgresql libboost-dev libssl-dev libspdlog-dev
  libgtest-dev libgmock-dev libhwloc-dev
  python3 python3-prometheus-client prometheus curl wrk
  chromium fonts-wqy-microhei
  clang libclang-rt-14-dev
  file lintian systemd adduser
)
# Node.js and npm build the web UI. A machine with Node.js from elsewhere
# (NodeSource bundles npm) keeps it; Debian's own otherwise.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing missing packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

# The prometheus package is here for its promtool (the metrics test lints
# /metrics with it). Its server, which the package enables and starts where
# systemd runs, is not wanted: one this script just installed is stopped
# and disabled again.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
