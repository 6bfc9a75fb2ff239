#!/usr/bin/env bash
# Pods per second through a real kube-apiserver with draguard's webhooks and backstop policy
# registered versus without (test/cluster's control plane, one g4dn.metal Node; rounds alternate;
# server-side dry-run creates from 50 concurrent clients): the cost draguard adds to Pod creation.
# Usage: bench/cluster-create.sh [BUILD_DIR]   (needs the draguard build and Go)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
"$root/test/cluster/prepare.sh" "$build/test/cluster/cluster.test"
DRAGUARD="$build/src/cli/draguard" DRAGUARD_SOURCE_DIR="$root" \
  "$build/test/cluster/cluster.test" -test.run '^$' -test.bench '^BenchmarkPodCreate$' -test.benchtime 1x -test.v
