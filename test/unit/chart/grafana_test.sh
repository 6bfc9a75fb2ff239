#!/usr/bin/env bash
# chart_grafana: the chart's Grafana dashboard. Every PromQL expression parses with Prometheus'
# parser (@prometheus-io/lezer-promql) and names only metrics a running `draguard serve` exports.
#
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
# Needs helm as found by find-helm.sh, node with test/tools/node_modules (js-yaml,
# @prometheus-io/lezer-promql; scripts/install-test-tools.sh) and the draguard binary in
# $DRAGUARD_BIN.
set -euo pipefail
cd "$(dirname "$0")"
modules=../../tools/node_modules
missing=()
command -v node >/dev/null 2>&1 || missing+=(node)
if ! helm_bin=$(bash find-helm.sh) || ! "$helm_bin" version >/dev/null 2>&1; then missing+=(helm); fi
for m in js-yaml @prometheus-io/lezer-promql @lezer/lr; do [ -d "$modules/$m" ] || missing+=("$m"); done
[ -x "${DRAGUARD_BIN:-}" ] || missing+=("DRAGUARD_BIN (the draguard binary)")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "chart_grafana: SKIPPED: missing ${missing[*]} (scripts/install-test-tools.sh installs the tools)" >&2
  exit 77
fi
exec node grafana_test.mjs --helm "$helm_bin" --root "$(cd ../../.. && pwd)" --bin "$DRAGUARD_BIN"
