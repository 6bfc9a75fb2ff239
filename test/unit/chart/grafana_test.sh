#!/usr/bin/env bash
# chart_grafana: the chart's Grafana dashboard. Every PromQL expression parses with Prometheus'
# parser (@prometheus-io/lezer-promql) and names only metrics a running `draguard serve` exports.
#
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
# Tools: helm as found by find-helm.sh, node with test/tools/node_modules (js-yaml,
# @prometheus-io/lezer-promql), and the draguard binary in $DRAGUARD_BIN.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tools="$root/test/tools/node_modules"

skip() { echo "chart_grafana: SKIPPED: $*" >&2; exit 77; }

command -v node >/dev/null 2>&1 || skip "node not found"
helm_bin=$(bash "$here/find-helm.sh") || skip "helm not found (run scripts/install-test-tools.sh, or set HELM)"
"$helm_bin" version >/dev/null 2>&1 || skip "helm at $helm_bin does not run"
for mod in js-yaml @prometheus-io/lezer-promql @lezer/lr; do
  [ -d "$tools/$mod" ] || skip "node module $mod missing (run scripts/install-test-tools.sh)"
done
[ -x "${DRAGUARD_BIN:-}" ] || skip "DRAGUARD_BIN is not the draguard binary"

exec node "$here/grafana_test.mjs" --helm "$helm_bin" --root "$root" --bin "$DRAGUARD_BIN"
