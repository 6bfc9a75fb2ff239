#!/usr/bin/env bash
# topology_draw_render: renders `draguard topology draw` pictures in headless Chromium and checks
# the PNGs (not blank, aspect kept); see draw_render_test.mjs. With --keep DIR it also writes the
# natural-size PNGs there (docs/img: bash test/unit/topology/draw_render_test.sh --keep docs/img).
#
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
# Tools: node, Debian's chromium (scripts/install-test-deps.sh installs it), the draguard binary
# in $DRAGUARD_BIN.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)

skip() { echo "topology_draw_render: SKIPPED: $*" >&2; exit 77; }

command -v node >/dev/null 2>&1 || skip "node not found"
chromium_bin=${CHROMIUM:-$(command -v chromium || true)}
[ -n "$chromium_bin" ] && [ -x "$chromium_bin" ] || skip "chromium not found (run scripts/install-test-deps.sh)"
[ -x "${DRAGUARD_BIN:-}" ] || skip "DRAGUARD_BIN is not the draguard binary"

exec node "$here/draw_render_test.mjs" --bin "$DRAGUARD_BIN" --chromium "$chromium_bin" --data "$root/test/data" "$@"
