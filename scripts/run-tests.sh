#!/usr/bin/env bash
# README command 2: install dependencies and test tools, build, run every test under CTest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/install-test-tools.sh"
"$root/scripts/build.sh" -DDRAGUARD_TESTS=ON -DDRAGUARD_BENCH=ON
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)" --timeout 600
