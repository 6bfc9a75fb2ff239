#!/usr/bin/env bash
# Builds the draguard container image from Debian packages only (no container registry) and
# writes it as an OCI archive, the file that `podman load`, `kind load image-archive` and
# `ctr images import` take.
#
#   scripts/build-image.sh [--binary PATH] [--output FILE] [--tag TAG]
#   scripts/build-image.sh --rootfs DIR [--binary PATH]    (only the root filesystem; the
#                                                          Dockerfile's builder stage uses this)
#
# The root filesystem holds exactly the Debian packages that own the binary's shared libraries
# (found with ldd and dpkg -S, plus their dependencies) and the CA bundle, extracted by
# `mmdebstrap --variant=extract` from the build machine's Debian release, so the libraries are
# the ones the binary was built against. buildah assembles the image from scratch: the binary at
# IMAGE_BINARY, user IMAGE_UID:IMAGE_GID (deploy/image/image.env), nothing writable needed.
#
# Defaults: the binary is $BUILD_DIR/src/cli/draguard (build/ when unset; built with scripts/build.sh
# when missing), the tag is the chart's appVersion, the archive is $BUILD_DIR/draguard-image.oci.tar.
# Runs as root (mmdebstrap --mode=root, chroot). Installs its tools (mmdebstrap, buildah,
# binutils) with apt-get when they are missing.
# Storage is a private directory removed on exit (vfs driver), so nothing is left in
# /var/lib/containers. DRAGUARD_IMAGE_MIRROR: a mirror URL or sources file for mmdebstrap
# (default: deb.debian.org with the release's updates and security suites).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"

binary=""
output="${BUILD_DIR:-$root/build}/draguard-image.oci.tar"
tag=""
rootfs_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --rootfs) rootfs_only=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
say() { echo "build-image: [$(( $(date +%s) - start ))s] $*" >&2; }

need=(mmdebstrap binutils)
[ -z "$rootfs_only" ] && need+=(buildah)
"$root/scripts/apt-install.sh" "${need[@]}"

if [ -z "$binary" ]; then
  binary="${BUILD_DIR:-$root/build}/src/cli/draguard"
  if [ ! -x "$binary" ]; then
    say "building $binary"
    bash "$root/scripts/install-deps.sh"
    bash "$root/scripts/build.sh" -DDRAGUARD_TESTS=OFF -DDRAGUARD_BENCH=OFF
  fi
fi
[ -x "$binary" ] || { echo "build-image: $binary is not an executable" >&2; exit 1; }
version=$("$binary" version | head -n1)
if [ -z "$tag" ]; then
  tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/draguard/Chart.yaml")
fi
[ -n "$tag" ] || { echo "build-image: no tag (appVersion missing in Chart.yaml)" >&2; exit 1; }

# Debian packages owning the binary's shared libraries. With merged /usr, ldd may report
# /lib/... while dpkg knows /usr/lib/... (or the other way round): ask for both spellings at once.
mapfile -t libs < <(ldd "$binary" | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' | sort -u)
[ "${#libs[@]}" -gt 0 ] || { echo "build-image: ldd found no shared libraries in $binary" >&2; exit 1; }
candidates=()
for lib in "${libs[@]}"; do
  candidates+=("$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}")
done
owners=$(dpkg -S "${candidates[@]}" 2>/dev/null || true)
packages=()
for lib in "${libs[@]}"; do
  owner=""
  for candidate in "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"; do
    owner=$(printf '%s\n' "$owners" | awk -v f="$candidate" '{ p = $0; sub(/^[^:]*(:[^:]*)?: /, "", p) }
      p == f { sub(/[:,].*/, ""); print; exit }')
    [ -n "$owner" ] && break
  done
  [ -n "$owner" ] || { echo "build-image: no Debian package owns $lib" >&2; exit 1; }
  packages+=("$owner")
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" ca-certificates | sort -u)
. /etc/os-release
suite=${VERSION_CODENAME:?/etc/os-release has no VERSION_CODENAME}
say "runtime packages ($suite): ${packages[*]}"

work=$(mktemp -d /tmp/draguard-image.XXXXXX)
cleanup() {
  if [ -n "${store:-}" ]; then
    buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs rm --all >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
rootfs=${rootfs_only:-$work/rootfs}
mkdir -p "$rootfs"

# No mounts (the extract variant runs nothing in the root filesystem; a Docker build cannot mount).
# The extract variant runs no maintainer scripts, so the CA bundle that update-ca-certificates
# would generate is assembled here from the certificates the package ships.
ca_hook='set -e; mkdir -p "$1/etc/ssl/certs";
  find "$1/usr/share/ca-certificates/mozilla" -name "*.crt" | LC_ALL=C sort | xargs cat > "$1/etc/ssl/certs/ca-certificates.crt";
  test -s "$1/etc/ssl/certs/ca-certificates.crt"'
include=$(IFS=,; echo "${packages[*]}")
say "extracting the root filesystem"
mmdebstrap --quiet --mode=root --variant=extract --include="$include" \
  --skip=check/empty,chroot/mount --extract-hook="$ca_hook" \
  "$suite" "$rootfs" ${DRAGUARD_IMAGE_MIRROR:+"$DRAGUARD_IMAGE_MIRROR"}

# What a static image needs and nothing else: drop package metadata, docs (copyright files
# stay), man pages, locales and the device nodes/apt state mmdebstrap creates.
rm -rf "$rootfs"/var/lib/apt "$rootfs"/var/cache/apt "$rootfs"/var/log/* "$rootfs"/etc/apt \
  "$rootfs"/usr/share/man "$rootfs"/usr/share/locale "$rootfs"/usr/share/lintian \
  "$rootfs"/usr/share/info "$rootfs"/dev/* "$rootfs"/var/lib/dpkg
find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
mkdir -p "$rootfs/tmp" "$rootfs/etc" "$rootfs$(dirname "$IMAGE_BINARY")"
chmod 1777 "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' \
  "$IMAGE_UID" "$IMAGE_GID" > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' "$IMAGE_GID" > "$rootfs/etc/group"
strip --strip-unneeded -o "$rootfs$IMAGE_BINARY" "$binary"
chmod 0755 "$rootfs$IMAGE_BINARY"
# The libraries resolve inside the root filesystem (no host library leaks in).
if ! missing_libs=$(chroot "$rootfs" "$IMAGE_BINARY" version 2>&1 >/dev/null); then
  echo "build-image: the binary does not run in the root filesystem: $missing_libs" >&2; exit 1
fi
if [ -n "$rootfs_only" ]; then
  say "root filesystem in $rootfs ($(du -sh "$rootfs" | cut -f1))"
  exit 0
fi

store=$work/store
b=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
ref="$IMAGE_REPOSITORY:$tag"
say "assembling $ref"
ctr=$("${b[@]}" from --quiet scratch)
# The root filesystem as one layer, owned by root (the image user cannot change it).
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 -cf "$work/rootfs.tar" .
"${b[@]}" add --quiet "$ctr" "$work/rootfs.tar" /
"${b[@]}" config \
  --entrypoint "[\"$IMAGE_BINARY\"]" --cmd '["serve"]' \
  --user "$IMAGE_UID:$IMAGE_GID" --workingdir /tmp \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --env GLIBC_TUNABLES="$IMAGE_GLIBC_TUNABLES" \
  --port 8443/tcp --port 9090/tcp \
  --label org.opencontainers.image.title=draguard \
  --label org.opencontainers.image.description="Admission webhook for GPU allocation with Dynamic Resource Allocation" \
  --label org.opencontainers.image.version="$tag" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label io.draguard.binary-version="$version" \
  --label io.draguard.debian-suite="$suite" \
  "$ctr"
"${b[@]}" commit --quiet --rm "$ctr" "$ref" >/dev/null
mkdir -p "$(dirname "$output")"
rm -f "$output"
"${b[@]}" push --quiet "$ref" "oci-archive:$output:$ref"
say "wrote $output ($ref, $(du -h "$output" | cut -f1))"
echo "$output"
