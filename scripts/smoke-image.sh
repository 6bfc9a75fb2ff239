#!/usr/bin/env bash
# Smoke test of the container image written by scripts/build-image.sh, under podman:
#   scripts/smoke-image.sh [ARCHIVE]     (default $BUILD_DIR/draguard-image.oci.tar, build/ when unset)
# 1. the image's entrypoint, user and working directory are those of deploy/image/image.env;
# 2. `draguard version` runs in it and reports the image tag;
# 3. `draguard serve` runs with a read-only root filesystem, a read-only certificate mount and no
#    capabilities, on a loopback port chosen by the kernel; /healthz answers over TLS verified
#    against a CA generated here, and a Pod asking for nvidia.com/gpu is denied with DG001;
# 4. `draguard topology export` runs in the container when the binary has that command;
# 5. SIGTERM stops the server cleanly (exit 0) within --shutdown-delay plus a short drain.
# Storage is a private directory removed on exit. Installs podman, runc, openssl and curl with
# apt-get when missing. Prints "smoke-image: N passed, 0 failed" or exits 1 at the first failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"
archive=${1:-${BUILD_DIR:-$root/build}/draguard-image.oci.tar}
[ -f "$archive" ] || { echo "smoke-image: $archive not found (run scripts/build-image.sh)" >&2; exit 1; }

start=$(date +%s)
passed=0
say() { echo "smoke-image: [$(( $(date +%s) - start ))s] $*"; }
ok() { passed=$((passed + 1)); say "ok   $*"; }
fail() { say "FAIL $*"; exit 1; }

"$root/scripts/apt-install.sh" podman runc openssl curl

work=$(mktemp -d /tmp/draguard-smoke.XXXXXX)
chmod 0755 "$work"
# crun (podman's default runtime) cannot start containers on every machine (cgroup and rlimit
# setup); runc with explicit limits can. No systemd: cgroupfs and file events.
p=(podman --root "$work/store" --runroot "$work/run" --storage-driver vfs
   --cgroup-manager cgroupfs --events-backend file --runtime runc)
run=("${p[@]}" run --ulimit nofile=20000:20000 --ulimit nproc=32768:32768
     --network host --read-only --cap-drop ALL --security-opt no-new-privileges)
server=""
cleanup() {
  if [ -n "$server" ]; then "${p[@]}" rm -f -t 0 "$server" >/dev/null 2>&1 || true; fi
  "${p[@]}" rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# 1. Load and inspect.
loaded=$("${p[@]}" load -q -i "$archive" 2>&1) || fail "podman load: $loaded"
image=$(printf '%s\n' "$loaded" | sed -n 's/^Loaded image: *//p' | head -n1)
[ -n "$image" ] || fail "podman load printed no image name: $loaded"
tag=${image##*:}
eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
eq "image repository" "${image%:*}" "$IMAGE_REPOSITORY"
eq "entrypoint" "$("${p[@]}" image inspect -f '{{json .Config.Entrypoint}}' "$image")" "[\"$IMAGE_BINARY\"]"
eq "user" "$("${p[@]}" image inspect -f '{{.Config.User}}' "$image")" "$IMAGE_UID:$IMAGE_GID"
eq "working directory" "$("${p[@]}" image inspect -f '{{.Config.WorkingDir}}' "$image")" "/tmp"
ok "loaded $image ($("${p[@]}" image inspect -f '{{.Size}}' "$image") bytes): entrypoint, user, workdir"

# 2. draguard version, as the image user.
out=$("${run[@]}" --rm "$image" version 2>&1) || fail "draguard version: $out"
eq "draguard version" "$out" "draguard $tag"
ok "draguard version prints '$tag'"

# 3. draguard serve over TLS with a CA generated here.
tls=$work/tls
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=draguard smoke CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$tls/tls.key" -out "$tls/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$tls/ext.cnf"
openssl x509 -req -in "$tls/tls.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
  -days 1 -extfile "$tls/ext.cnf" -out "$tls/tls.crt" 2>/dev/null
rm -f "$tls/ca.key" "$tls/tls.csr"
chmod 0755 "$tls"
chmod 0644 "$tls"/*   # readable by the image user (a throwaway key)

server=$("${run[@]}" -d -v "$tls:/tls:ro" "$image" serve --listen 127.0.0.1:0 \
  --tls-cert /tls/tls.crt --tls-key /tls/tls.key --kube off --shutdown-delay 1 --log-level info) \
  || fail "podman run serve: $server"
# The server logs the port it was given; wait (bounded) for that line.
port=""
for _ in $(seq 1 100); do
  port=$("${p[@]}" logs "$server" 2>/dev/null | sed -n 's/.*"msg":"listening","address":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' | head -n1)
  [ -n "$port" ] && break
  [ "$("${p[@]}" inspect -f '{{.State.Running}}' "$server")" = true ] || break
  sleep 0.1
done
[ -n "$port" ] || fail "server did not report its port: $("${p[@]}" logs "$server" 2>&1 | tail -n 5)"
url="https://127.0.0.1:$port"
curl_tls=(curl -sS --max-time 5 --cacert "$tls/ca.crt")
out=$("${curl_tls[@]}" "$url/healthz") || fail "GET /healthz"
ok "serve on 127.0.0.1:$port (read-only root): /healthz -> $out"

review='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"0c9f2a10-5e6b-4c1d-9a7e-00000000d601","kind":{"group":"","version":"v1","kind":"Pod"},
 "resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-a","operation":"CREATE",
 "userInfo":{"username":"alice"},"dryRun":false,"oldObject":null,
 "object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"train","namespace":"team-a"},
  "spec":{"containers":[{"name":"main","image":"cuda","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}}}'
out=$("${curl_tls[@]}" -H 'Content-Type: application/json' --data-binary "$review" "$url/validate") \
  || fail "POST /validate"
printf '%s' "$out" | grep -q '"uid":"0c9f2a10-5e6b-4c1d-9a7e-00000000d601"' || fail "review uid not echoed: $out"
printf '%s' "$out" | grep -q '"allowed":false' || fail "legacy GPU Pod not denied: $out"
printf '%s' "$out" | grep -q 'DG001' || fail "denial is not DG001: $out"
ok "a Pod with nvidia.com/gpu is denied (DG001) over verified TLS"
if curl -sS --max-time 5 -o /dev/null "$url/healthz" 2>/dev/null; then
  fail "TLS without the CA was accepted"
fi
ok "TLS is refused without the generated CA"

# 4. Topology exporter hook: run `draguard topology export` in the container when the binary
# has that command, and read its output back with `draguard topology show`.
# The help is read whole first: `grep -q` on a pipe ends at the first match, and the writer's
# SIGPIPE would then fail the pipeline under pipefail (and skip this step at random).
help_text=$("${run[@]}" --rm "$image" help 2>/dev/null || true)
if [[ "$help_text" == *"draguard topology export"* ]]; then
  mkdir -p "$work/export"
  chmod 0777 "$work/export"   # writable by the image user
  "${run[@]}" --rm -v "$work/export:/export" "$image" topology export -o /export/node.xml \
    > "$work/export.log" 2>&1 || fail "draguard topology export: $(tail -n 5 "$work/export.log")"
  [ -s "$work/export/node.xml" ] || fail "draguard topology export wrote no file"
  out=$("${run[@]}" --rm -v "$work/export:/export:ro" "$image" topology show -f /export/node.xml 2>&1) \
    || fail "draguard topology show of the export: $out"
  ok "draguard topology export in the container; topology show reads it"
else
  say "skip draguard topology export (not a command of this binary)"
fi

# 5. SIGTERM: /readyz turns 503, the server keeps serving for --shutdown-delay, drains, exits 0.
"${p[@]}" stop -t 10 "$server" >/dev/null || fail "podman stop"
code=$("${p[@]}" inspect -f '{{.State.ExitCode}}' "$server")
eq "exit code after SIGTERM" "$code" "0"
ok "SIGTERM: clean exit"
"${p[@]}" rm "$server" >/dev/null
server=""

say "done in $(( $(date +%s) - start ))s"
echo "smoke-image: $passed passed, 0 failed"
