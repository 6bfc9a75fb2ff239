#!/usr/bin/env bash
# The topology at cluster scale, on test/cluster's real control plane: N Node objects (default
# 10000) of eight hardware shapes from test/data/hwloc, published the way the exporter publishes
# (BenchmarkTopologyScale in test/cluster/e2e/topology_scale_bench_test.go says how), then a
# draguard serve started afresh. Prints one line:
#   topology-scale nodes N etcd-bytes B rss-bytes R ready-s T propagate-s P
# B: etcd bytes the topology adds; R: the server's peak RSS once all N nodes are known; T: start
# to ready with all N nodes known; P: one node's change to the running server's model. The
# benchmark's log goes to $TMPDIR/topology-scale.log.
# Usage: bench/topology-scale.sh [N] [BUILD_DIR]   (needs the draguard build and Go)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=${1:-10000}
build=${2:-$root/build}
case "$nodes" in ''|*[!0-9]*) echo "usage: bench/topology-scale.sh [N] [BUILD_DIR]" >&2; exit 2;; esac
log=${TMPDIR:-/tmp}/topology-scale.log
"$root/test/cluster/prepare.sh" "$build/test/cluster/cluster.test"
rc=0
TOPOLOGY_SCALE_NODES=$nodes DRAGUARD="$build/src/cli/draguard" DRAGUARD_SOURCE_DIR="$root" \
  "$build/test/cluster/cluster.test" -test.run '^$' -test.bench '^BenchmarkTopologyScale$' -test.benchtime 1x \
  -test.v -test.timeout 60m > "$log" 2>&1 || rc=$?
if ! grep -E '^topology-scale nodes ' "$log"; then
  tail -n 40 "$log" >&2
  echo "topology-scale: the benchmark failed (exit $rc); its log: $log" >&2
  exit 1
fi
exit "$rc"
