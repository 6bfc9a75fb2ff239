#!/usr/bin/env bash
# Configures and builds draguard into build/ (Release with line tables, Ninja: -O2 -g1, which keeps
# file:line in backtraces and compiles about a third faster than full debug information).
# BUILD_DIR picks another build directory; BUILD_TARGETS (space-separated) builds only those targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "$@" >/dev/null
targets=()
# shellcheck disable=SC2206  # word splitting of the list is meant
[ -n "${BUILD_TARGETS:-}" ] && targets=(--target ${BUILD_TARGETS})
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
