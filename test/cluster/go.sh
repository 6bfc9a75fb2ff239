#!/usr/bin/env bash
# The go command of draguard's Go tools (test/cluster, bench/peers): runs `go ARGS...` with a Go
# toolchain that test/cluster/go.mod accepts. go.mod is the one place that names the version: its
# `toolchain` line, else its `go` line.
#
# - A `go` on PATH of that version or newer is used as it is.
# - Otherwise the toolchain is the Go module golang.org/toolchain, version
#   v0.0.1-go<version>.linux-<arch>, from the Go module proxy (GOPROXY) into the Go module cache:
#   what GOTOOLCHAIN does, done here so that any Go can fetch it (Debian 12's golang-go is Go 1.19,
#   older than GOTOOLCHAIN). Once fetched, its execute bits are set and its `_go.mod` files copied
#   to `go.mod`, as cmd/go does after such a download (so a later GOTOOLCHAIN switch finds it
#   ready too); the module's checksum is checked against GOSUMDB like any module's.
# - The Go that fetches it is any `go` on PATH, else Debian's golang-go, installed for that.
#
# The toolchain runs with GOTOOLCHAIN=local: the choice is made here, once.
# Usage: go.sh ARGS...              run go
#        go.sh --bootstrap-package  print the Debian package this machine needs before go.sh can
#                                   fetch the toolchain (golang-go), or nothing
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
say() { echo "go.sh: $*" >&2; }

# The version go.mod asks for (1.26.8 from "toolchain go1.26.8", else 1.26.0 from "go 1.26.0").
required=$(sed -n 's/^toolchain go\([0-9][0-9.a-z]*\)$/\1/p' "$here/go.mod")
[ -n "$required" ] || required=$(sed -n 's/^go \([0-9][0-9.a-z]*\)$/\1/p' "$here/go.mod")
[ -n "$required" ] || { say "no go or toolchain line in $here/go.mod"; exit 1; }

# version_at_least HAVE WANT: HAVE (e.g. go1.26.8) is WANT (e.g. 1.26.8) or newer.
version_at_least() {
  local have=${1#go}
  have=${have%% *}
  [ "$(printf '%s\n%s\n' "$2" "$have" | sort -V | head -n 1)" = "$2" ]
}
path_go_version() { command -v go > /dev/null 2>&1 && GOTOOLCHAIN=local go env GOVERSION 2> /dev/null; }

have=$(path_go_version || true)
if [ "${1:-}" != "--bootstrap-package" ] && [ -n "$have" ] && version_at_least "$have" "$required"; then
  GOTOOLCHAIN=local exec go "$@"
fi

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) say "no Go toolchain module for machine $(uname -m)"; exit 1 ;;
esac
module="golang.org/toolchain@v0.0.1-go$required.linux-$arch"
# The module cache: the one of the go on PATH, else as Go computes it (GOMODCACHE, else the first
# GOPATH entry's pkg/mod, else ~/go/pkg/mod).
if [ -n "$have" ]; then
  modcache=$(GOTOOLCHAIN=local go env GOMODCACHE)
else
  gopath=${GOPATH:-$HOME/go}
  modcache=${GOMODCACHE:-${gopath%%:*}/pkg/mod}
fi
toolchain=$modcache/$module
# Ready: bin/go executable and src/go.mod present (the last step of fetch, as in cmd/go).
ready() { [ -x "$toolchain/bin/go" ] && [ -f "$toolchain/src/go.mod" ]; }

if [ "${1:-}" = "--bootstrap-package" ]; then
  if [ -z "$have" ] && ! ready; then echo golang-go; fi
  exit 0
fi

# fetch: downloads the toolchain module into the module cache and makes it runnable. One at a
# time (the background control-plane build and the CTest fixture may both ask).
fetch() {
  local lockdir=${XDG_CACHE_HOME:-$HOME/.cache}/draguard-cluster
  mkdir -p "$lockdir"
  exec 8> "$lockdir/.go-toolchain.lock"
  flock 8
  if ready; then return; fi
  if [ -z "$have" ]; then
    say "no go on PATH: installing Debian's golang-go to fetch Go $required"
    "$here/../../scripts/apt-install.sh" golang-go 8>&-
    hash -r
    have=$(path_go_version) || { say "golang-go is installed but no go is on PATH"; exit 1; }
  fi
  say "fetching Go $required ($module) with $have from the Go module proxy"
  local scratch json dir
  scratch=$(mktemp -d)
  # Outside any module (a scratch directory), module mode on: go mod download takes module@version.
  if ! json=$(cd "$scratch" && GO111MODULE=on GOFLAGS= GOTOOLCHAIN=local GOMODCACHE="$modcache" \
      go mod download -json "$module"); then
    rm -rf "$scratch"
    say "downloading $module failed:"; echo "$json" >&2; exit 1
  fi
  rm -rf "$scratch"
  dir=$(echo "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ "$dir" = "$toolchain" ] || { say "$module unpacked into '$dir', expected $toolchain"; exit 1; }
  # Module zips keep no file modes: the commands get their execute bits (pkg/tool and lib before
  # bin/go, whose bits mark them done, as cmd/go orders it).
  find "$toolchain/pkg/tool" -type f -exec chmod a+x {} +
  find "$toolchain/lib" -type f -name 'go_?*_?*_exec' -exec chmod a+x {} +
  find "$toolchain/bin" -type f -exec chmod a+x {} +
  # A module zip holds no nested go.mod: the standard library's are shipped as _go.mod. src/go.mod
  # last: its presence says the toolchain is ready.
  local f d
  while IFS= read -r f; do
    [ "$f" = "$toolchain/src/_go.mod" ] && continue
    d=$(dirname "$f")
    chmod u+w "$d" && cp "$f" "$d/go.mod" && chmod u-w "$d"
  done < <(find "$toolchain" -name _go.mod)
  chmod u+w "$toolchain/src" && cp "$toolchain/src/_go.mod" "$toolchain/src/go.mod" && chmod u-w "$toolchain/src"
  say "Go $required is in $toolchain"
  exec 8>&-
}
ready || fetch
GOROOT=$toolchain GOTOOLCHAIN=local exec "$toolchain/bin/go" "$@"
