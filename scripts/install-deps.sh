#!/usr/bin/env bash
# Installs everything draguard needs to build, test and benchmark on Debian 12. Idempotent.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libcpp-httplib-dev libboost-dev nlohmann-json3-dev libyaml-cpp-dev libssl-dev openssl
  libsimdjson-dev libhwloc-dev hwloc-nox libre2-dev libxml2-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang libclang-rt-14-dev
  wrk nginx-light python3 python3-jsonpatch
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm (for the test tools taken from npm) only when no node is present.
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# nginx-light is only a benchmark reference: never leave the distribution's default site running.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
  $SUDO systemctl stop nginx || true
fi
