#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue/cmd/kueue at the release go.mod pins, with the graph
# of Go modules that release's own go.mod gives it), JobSet's manager (sigs.k8s.io/jobset at the
# release that Kueue requires), the NVIDIA DRA driver's compute-domain controller and the harness's
# helper (cmd/kueue-harness), copies their CRDs, webhook manifests, templates and chart
# from the same module versions, and prints the directory that holds them:
#   bin/kueue            Kueue's manager, reporting the release (`kueue --version` is not a flag;
#                        its log's first line names GitVersion and GitCommit)
#   bin/jobset           JobSet's manager (its log's "Initializing" line names the release)
#   bin/compute-domain-controller
#                        the NVIDIA DRA driver's compute-domain controller (static)
#   dra-driver-nvidia-gpu/{templates,dra-driver-nvidia-gpu,release}
#                        its claim and DaemonSet templates, its Helm chart, and the release
#   bin/kueue-harness    what cluster.sh runs to write their Configurations and manifests
#   config/              Kueue's config/components/{crd,webhook}
#   config/jobset/       JobSet's config/components/{crd,webhook}
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
# release MODULE: "version|module directory|commit|tag time" of the module at the version go.mod
# selects, from the module proxy's record of the tag (.info: Version, Time, Origin.Hash).
release() {
  local version moddir gomod info listed
  listed=$(cd "$here" && "$go" mod download -json "$1" > /dev/null &&
    "$go" list -m -f '{{.Version}}|{{.Dir}}|{{.GoMod}}' "$1") ||
    { echo "kueue build: cannot download or list $1" >&2; return 1; }
  IFS='|' read -r version moddir gomod <<< "$listed"
  info="${gomod%.mod}.info"
  echo "$version|$moddir|$(sed -n 's/.*"Hash":"\([0-9a-f]\{40\}\)".*/\1/p' "$info" 2>/dev/null)|$(
    sed -n 's/.*"Time":"\([0-9TZ:.-]*\)".*/\1/p' "$info" 2>/dev/null)"
}
if [ ! -f "$out/.complete" ]; then
  mkdir -p "$out/bin"
  rm -rf "$out/config"
  mkdir -p "$out/config/jobset"
  # Kueue, stamped with its release and commit as its Makefile does (pkg/version).
  r=$(release sigs.k8s.io/kueue)
  IFS='|' read -r version moddir commit tagged <<< "$r"
  [ -d "$moddir/config/components" ] || { echo "kueue build: no config/components in $moddir" >&2; exit 1; }
  pkg=sigs.k8s.io/kueue/pkg/version
  ldflags="-s -w -X $pkg.GitVersion=$version -X $pkg.GitCommit=${commit:-unknown} -X $pkg.BuildDate=${tagged:-unknown}"
  echo "kueue build: building Kueue $version (${commit:-commit unknown}) with $goversion (cold: about 5½ minutes on 2 cores)" >&2
  # -trimpath as test/cluster/build.sh: the standard library comes from Go's cache when it built.
  (cd "$here" && "$go" build -trimpath -ldflags="$ldflags" -o "$out/bin/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue)
  cp -R "$moddir/config/components/crd" "$moddir/config/components/webhook" "$out/config/"
  # JobSet, at the release Kueue's go.mod requires (the API its integration was built against),
  # stamped as its Makefile does. It is built in Kueue's module graph, so that it costs only its own
  # packages: every module JobSet uses is at the version its go.mod asks for or a later one
  # (k8s.io 0.36.0 -> 0.36.2, controller-runtime 0.24.0 -> 0.24.1, newer x/net, grpc, otel, zap).
  r=$(release sigs.k8s.io/jobset)
  IFS='|' read -r version moddir commit tagged <<< "$r"
  [ -d "$moddir/config/components" ] || { echo "kueue build: no config/components in $moddir" >&2; exit 1; }
  pkg=sigs.k8s.io/jobset/pkg/version
  echo "kueue build: building JobSet $version (${commit:-commit unknown})" >&2
  (cd "$here" && "$go" build -trimpath -ldflags="-s -w -X $pkg.GitVersion=$version -X $pkg.GitCommit=${commit:-unknown}" \
    -o "$out/bin/jobset" sigs.k8s.io/jobset)
  cp -R "$moddir/config/components/crd" "$moddir/config/components/webhook" "$out/config/jobset/"
  # The NVIDIA DRA driver's compute-domain controller (sigs.k8s.io/dra-driver-nvidia-gpu at the
  # release go.mod pins), built in the same graph (go.mod's only additions for it are the driver
  # and four small modules), with its claim templates and its Helm chart from the same module
  # version. It reads the templates from the absolute path /templates, so cluster.sh runs it in a
  # root directory of its own: netgo and osusergo keep the binary static (no C library in there),
  # which ldd checks.
  r=$(release sigs.k8s.io/dra-driver-nvidia-gpu)
  IFS='|' read -r version moddir commit tagged <<< "$r"
  [ -d "$moddir/templates" ] && [ -d "$moddir/deployments/helm/dra-driver-nvidia-gpu" ] ||
    { echo "kueue build: no templates or chart in $moddir" >&2; exit 1; }
  echo "kueue build: building the compute-domain controller of dra-driver-nvidia-gpu $version (${commit:-commit unknown})" >&2
  (cd "$here" && "$go" build -trimpath -tags netgo,osusergo -ldflags=-s \
    -o "$out/bin/compute-domain-controller" sigs.k8s.io/dra-driver-nvidia-gpu/cmd/compute-domain-controller)
  command -v ldd > /dev/null || { echo "kueue build: no ldd to check the compute-domain controller" >&2; exit 1; }
  if ldd "$out/bin/compute-domain-controller" > /dev/null 2>&1; then
    echo "kueue build: the compute-domain controller is not a static binary" >&2
    exit 1
  fi
  rm -rf "$out/dra-driver-nvidia-gpu"
  mkdir -p "$out/dra-driver-nvidia-gpu"
  cp -R "$moddir/templates" "$moddir/deployments/helm/dra-driver-nvidia-gpu" "$out/dra-driver-nvidia-gpu/"
  echo "$version" > "$out/dra-driver-nvidia-gpu/release"
  chmod -R u+w "$out/dra-driver-nvidia-gpu"
  (cd "$here" && "$go" build -trimpath -o "$out/bin/kueue-harness" ./cmd/kueue-harness)
  chmod -R u+w "$out/config"
  mv "$out/bin/kueue.tmp" "$out/bin/kueue"
  touch "$out/.complete"
fi
echo "$out"
