#!/usr/bin/env bash
# Builds the control plane of the cluster tests (test/cluster/cmd/controlplane: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl in one binary, at the
# release pinned in go.mod) and prints the binary's path. Outputs are cached outside the source
# tree, keyed by the module files and sources, so a second run builds nothing.
# DRAGUARD_CLUSTER_CACHE overrides the cache directory (default ~/.cache/draguard-cluster).
# Go is go.sh's: the toolchain go.mod pins, fetched when the machine has no such Go.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
go=$here/go.sh
cache=${DRAGUARD_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draguard-cluster}
goversion=$("$go" env GOVERSION GOOS GOARCH | paste -sd ' ')
key=$(cd "$here" && { cat go.mod go.sum cmd/controlplane/*.go build.sh; echo "$goversion"; } | sha256sum | cut -c1-16)
out="$cache/$key/controlplane"
mkdir -p "$cache/$key"
# One build at a time per key (scripts/run-tests.sh starts one early; the CTest fixture waits).
exec 9> "$cache/$key/.lock"
flock 9
if [ ! -x "$out" ]; then
  # The release the binaries report (kubectl version, /version): the k8s.io/kubernetes pin.
  release=$(cd "$here" && "$go" list -m -f '{{.Version}}' k8s.io/kubernetes)
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$release -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$release" | cut -d. -f2)"
  done
  echo "cluster build: building the control plane $release with $goversion (cold: about 11 minutes on 2 cores)" >&2
  (cd "$here" && "$go" build -trimpath -ldflags="$ldflags" -o "$out.tmp" ./cmd/controlplane)
  mv "$out.tmp" "$out"
fi
echo "$out"
