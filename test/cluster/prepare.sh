#!/usr/bin/env bash
# The fixture of the `cluster` CTest label: builds (or finds in its cache) the control plane and
# Kueue (kueue/build.sh), and compiles the Go tests of e2e/ into OUT. Usage: prepare.sh OUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: prepare.sh OUT" >&2; exit 2; }
"$here/build.sh" > /dev/null
"$here/kueue/build.sh" > /dev/null
# -trimpath as build.sh: the packages the tests share with the control plane come from Go's cache.
(cd "$here" && "$here/go.sh" test -c -trimpath -o "$1.tmp" ./e2e)
mv "$1.tmp" "$1"
