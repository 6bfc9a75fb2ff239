#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet, in one apt-get transaction
# (apt-get update first when the package lists are missing or stale for them). Idempotent: with
# everything installed it only asks dpkg. Through sudo when not root. Waits up to 10 minutes for
# another apt or dpkg run to finish instead of failing on its lock.
# Usage: apt-install.sh PACKAGE...
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ "${#missing[@]}" -gt 0 ] || exit 0

echo "apt-install: installing ${missing[*]}" >&2
apt=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
# Without lists (a fresh machine) or with lists that lack a package, update them first.
if ! "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" 2>/dev/null; then
  "${apt[@]}" update -qq
  "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi
