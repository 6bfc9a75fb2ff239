#!/bin/sh
# Installs the npm packages used only by draguard's test suite into test/tools/node_modules
# (git-ignored), exactly as pinned in test/tools/package.json and package-lock.json (shared by the
# modules' tests). For CEL: @bufbuild/cel-spec (CEL conformance data, Apache-2.0) and
# @marcbachmann/cel-js (an independent CEL implementation for differential tests, MIT). For the
# chart's Grafana dashboard: @prometheus-io/lezer-promql (Prometheus' PromQL parser, Apache-2.0)
# with its peers @lezer/lr and @lezer/highlight.
# Also Debian's chromium (headless, renders the topology pictures to PNG in topology_draw_render)
# through apt-get when it is missing.
# Needs node >= 18 and npm; CI runs this before the tests.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
command -v npm >/dev/null 2>&1 || { echo "install-test-tools: npm not found" >&2; exit 1; }
cd "$here/test/tools"
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
node -e 'require("./export_cel_spec.js")' >/dev/null
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium ||
    { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
fi
echo "install-test-tools: ok ($(node -p "require('./node_modules/@bufbuild/cel-spec/package.json').version" 2>/dev/null || echo cel-spec))"
