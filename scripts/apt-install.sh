#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet, in one apt-get transaction
# (apt-get update first when the package lists are missing or stale for them). Idempotent: with
# everything installed it only asks dpkg. Through sudo when not root. The project's scripts take
# turns (a lock file in TMPDIR); another apt-get install is waited for up to 10 minutes (dpkg's
# lock), another apt-get update is not (apt exits at once on the package lists' lock).
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

exec 9> "${TMPDIR:-/tmp}/draguard-apt-install.lock"
flock 9
echo "apt-install: installing ${missing[*]}" >&2
apt=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
# Without lists (a fresh machine) or with lists that lack a package, update them first. The lock
# stays with this script (9>&-): a service that a package's script starts must not keep it.
if ! "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" 2> /dev/null 9>&-; then
  "${apt[@]}" update -qq 9>&-
  "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" 9>&-
fi
