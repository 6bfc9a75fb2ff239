#!/usr/bin/env bash
# README command 2: installs what building and testing need, builds, runs every test under CTest.
# Prints the time of each step since its start.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
mkdir -p "$build_dir"
start=$(date +%s)
stamp() { echo "run-tests: [$(($(date +%s) - start))s] $*" >&2; }

stamp "Debian packages (build, tests)"
"$root/scripts/install-test-deps.sh"
# The control plane of the cluster tests and Kueue's manager (Go; with the toolchain
# test/cluster/go.sh fetches when the machine has no Go 1.26; about 11 and 5½ minutes cold on 2
# cores, nothing once cached) build while the npm tools install and the C++ side builds; the CTest
# fixture cluster_prepare waits for them (each build script takes a lock).
cluster_log="$build_dir/cluster-build.log"
stamp "control plane and Kueue: building in the background (log: $cluster_log)"
("$root/test/cluster/build.sh" && stamp "control plane: built" && "$root/test/cluster/kueue/build.sh" &&
  stamp "Kueue: built") > "$cluster_log" 2>&1 &
cluster_build=$!
stamp "Node.js and the npm test tools"
"$root/scripts/install-test-tools.sh"
stamp "C++ build (tests, benchmarks)"
"$root/scripts/build.sh" -DDRAGUARD_TESTS=ON -DDRAGUARD_BENCH=ON
stamp "CTest"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --timeout 600 || status=$?
wait "$cluster_build" || { cat "$cluster_log"; echo "run-tests: building the control plane or Kueue failed" >&2; exit 1; }
grep '^run-tests:' "$cluster_log" >&2 || true
stamp "done (ctest exit $status)"
exit "$status"
