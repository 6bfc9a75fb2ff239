#!/usr/bin/env bash
# chart_image: the chart's image reference, command path and user match the image that
# scripts/build-image.sh and deploy/image/Dockerfile build (deploy/image/image.env), plus the
# logLevel enum and README drift checks. Building and running the image is CI's job
# (.ci/run: scripts/build-image.sh, scripts/smoke-image.sh), not a test's.
# Exit codes: 0 all checks passed, 1 a check failed, 77 a tool is missing (CTest: Skipped).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
skip() { echo "chart_image: SKIPPED: $*" >&2; exit 77; }
command -v node >/dev/null 2>&1 || skip "node not found"
helm_bin=$(bash "$here/find-helm.sh") || skip "helm not found (run scripts/install-test-tools.sh, or set HELM)"
[ -d "$root/test/tools/node_modules/js-yaml" ] || skip "node module js-yaml missing (run scripts/install-test-tools.sh)"
exec node "$here/image_test.mjs" --helm "$helm_bin" --root "$root"
