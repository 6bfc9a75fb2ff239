#!/usr/bin/env bash
# Configures and builds draguard into build/ (Release with debug info, Ninja).
# BUILD_DIR picks another build directory; BUILD_TARGETS (space-separated) builds only those targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
targets=()
# shellcheck disable=SC2206  # word splitting of the list is meant
[ -n "${BUILD_TARGETS:-}" ] && targets=(--target ${BUILD_TARGETS})
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
