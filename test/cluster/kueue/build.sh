#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue/cmd/kueue at the release go.mod pins, with the graph
# of Go modules that release's own go.mod gives it) and the harness's helper (cmd/kueue-harness),
# copies Kueue's CRDs and webhook manifests from the same module version, and prints the
# directory that holds them:
#   bin/kueue            the manager, reporting the release (`kueue --version` is not a flag; its
#                        log's first line names GitVersion and GitCommit)
#   bin/kueue-harness    what cluster.sh runs to write its Configuration and manifests
#   config/              the module's config/components/{crd,webhook}
# Outputs are cached outside the source tree (~/.cache/draguard-cluster/kueue-<key>/, and Go's
# build cache), keyed by the module files, the helper's sources, this script and the Go version,
# so a second run builds nothing. DRAGUARD_CLUSTER_CACHE overrides the cache directory. Go is
# test/cluster/go.sh's: the toolchain test/cluster/go.mod pins, fetched when the machine has none.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
go=$here/../go.sh
cache=${DRAGUARD_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draguard-cluster}
goversion=$("$go" env GOVERSION GOOS GOARCH | paste -sd ' ')
key=$(cd "$here" && { cat go.mod go.sum build.sh cmd/kueue-harness/*.go; echo "$goversion"; } | sha256sum | cut -c1-16)
out="$cache/kueue-$key"
mkdir -p "$out"
# One build at a time per key (scripts/run-tests.sh starts one early; the CTest fixture waits).
exec 9> "$out/.lock"
flock 9
if [ ! -f "$out/.complete" ]; then
  # The release and its commit as Kueue's Makefile stamps them (pkg/version), from the module
  # proxy's record of the tag.
  IFS='|' read -r version moddir gomod < <(cd "$here" &&
    "$go" mod download -json sigs.k8s.io/kueue > /dev/null &&
    "$go" list -m -f '{{.Version}}|{{.Dir}}|{{.GoMod}}' sigs.k8s.io/kueue)
  [ -d "$moddir/config/components" ] || { echo "kueue build: no config/components in $moddir" >&2; exit 1; }
  info="${gomod%.mod}.info"  # {"Version", "Time": RFC 3339, "Origin": {"Hash": the tag's commit}}
  commit=$(sed -n 's/.*"Hash":"\([0-9a-f]\{40\}\)".*/\1/p' "$info" 2>/dev/null || true)
  tagged=$(sed -n 's/.*"Time":"\([0-9TZ:.-]*\)".*/\1/p' "$info" 2>/dev/null || true)
  pkg=sigs.k8s.io/kueue/pkg/version
  ldflags="-s -w -X $pkg.GitVersion=$version -X $pkg.GitCommit=${commit:-unknown} -X $pkg.BuildDate=${tagged:-unknown}"
  echo "kueue build: building Kueue $version (${commit:-commit unknown}) with $goversion (cold: about 5½ minutes on 2 cores)" >&2
  mkdir -p "$out/bin"
  # -trimpath as test/cluster/build.sh: the standard library comes from Go's cache when it built.
  (cd "$here" && "$go" build -trimpath -ldflags="$ldflags" -o "$out/bin/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue)
  (cd "$here" && "$go" build -trimpath -o "$out/bin/kueue-harness" ./cmd/kueue-harness)
  rm -rf "$out/config"
  mkdir -p "$out/config"
  cp -R "$moddir/config/components/crd" "$moddir/config/components/webhook" "$out/config/"
  chmod -R u+w "$out/config"
  mv "$out/bin/kueue.tmp" "$out/bin/kueue"
  touch "$out/.complete"
fi
echo "$out"
