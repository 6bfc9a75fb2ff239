#!/usr/bin/env bash
# README command 2: install dependencies and test tools, build, run every test under CTest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
mkdir -p "$build_dir"
# The control plane of the cluster tests (Go; about 11 minutes cold on 2 cores, nothing once
# cached) builds while packages install and the C++ side builds; the CTest fixture
# cluster_prepare waits for it (test/cluster/build.sh takes a lock).
cluster_log="$build_dir/cluster-build.log"
"$root/test/cluster/build.sh" > "$cluster_log" 2>&1 &
cluster_build=$!
"$root/scripts/install-deps.sh"
"$root/scripts/install-test-tools.sh"
"$root/scripts/build.sh" -DDRAGUARD_TESTS=ON -DDRAGUARD_BENCH=ON
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --timeout 600 || status=$?
wait "$cluster_build" || { cat "$cluster_log"; echo "run-tests: building the control plane failed" >&2; exit 1; }
exit "$status"
