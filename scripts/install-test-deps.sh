#!/usr/bin/env bash
# README command 2's Debian packages: what building and serving need (scripts/install-deps.sh)
# and the test toolchain, in one apt-get transaction. Idempotent. The tools from the npm registry
# and the Node.js they run on are scripts/install-test-tools.sh's; the Go toolchain of the cluster
# tests is fetched by test/cluster/go.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PKGS=(
  libgtest-dev libgmock-dev googletest libbenchmark-dev libxml2-dev  # the test and benchmark builds
  hwloc-nox                  # lstopo-no-graphics, which the exporter's test compares with
  python3 python3-jsonpatch  # the mutation fixtures' patch check, helm's extraction
  openssl ca-certificates    # the test clusters' certificates; the Go and npm registries
  chromium                   # renders the topology pictures (topology_draw_render)
  wrk nginx-light            # bench/: the load generator and the reference server
  libnginx-mod-http-echo     # bench/peers.sh: nginx as a webhook (echoes the review's uid)
  clang libclang-rt-14-dev   # libFuzzer builds (.ci/run)
)
# npm (with Debian's Node.js) fetches the test tools' Node.js when the machine has no npm.
if ! command -v npm > /dev/null 2>&1; then PKGS+=(npm); fi
# Debian's Go when there is no Go to fetch the cluster tests' toolchain with.
read -r -a go_bootstrap <<< "$("$root/test/cluster/go.sh" --bootstrap-package)"
"$root/scripts/install-deps.sh" "${PKGS[@]}" "${go_bootstrap[@]}"
# nginx-light is only a benchmark reference: never leave the distribution's default site running.
if command -v systemctl > /dev/null 2>&1 && systemctl is-active --quiet nginx 2> /dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo systemctl stop nginx || true
fi
