#!/usr/bin/env bash
# README command 1: install dependencies, build, and run `draguard serve` on its embedded
# defaults (https://127.0.0.1:8443, state folder ./.draguard, bundled policy and topology).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" -DDRAGUARD_TESTS=OFF -DDRAGUARD_BENCH=OFF
exec "$root/build/src/cli/draguard" serve "$@"
