#!/usr/bin/env bash
# README command 1's packages: installs from Debian 12 what building and serving draguard need.
# Debian packages named as arguments join the same apt-get transaction (scripts/install-test-deps.sh
# names the test toolchain's). Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PKGS=(
  build-essential cmake ninja-build pkg-config
  libcpp-httplib-dev libboost-dev nlohmann-json3-dev libyaml-cpp-dev libssl-dev
  libsimdjson-dev libhwloc-dev libre2-dev libnghttp2-dev
  curl  # the README's request to the running server
)
"$here/apt-install.sh" "${PKGS[@]}" "$@"
