#!/usr/bin/env bash
# The real control plane of draguard's cluster tests, on loopback, as local processes.
#   cluster.sh up DIR --exports PATH...   start etcd, kube-apiserver, kube-controller-manager and
#                                         kube-scheduler; one Node per hwloc export (name = file
#                                         name without .xml)
#   cluster.sh down DIR                   stop everything up started; DIR may be deleted after
# After up: DIR/kubeconfig (cluster-admin) and DIR/bin/kubectl (same release). Logs in DIR/logs/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds or the deadline passes.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  echo "cluster.sh: $what ready" >&2
}

# start DIR NAME ARGS...: runs the control-plane binary as NAME in the background, pid in DIR/pids.
start() {
  local dir=$1 name=$2; shift 2
  "$dir/bin/controlplane" "$name" "$@" > "$dir/logs/$name.log" 2>&1 &
  echo "$!" > "$dir/pids/$name"
}

alive() { [ -f "$1/pids/$2" ] && kill -0 "$(cat "$1/pids/$2")" 2>/dev/null; }

pki() {
  local d=$1/pki
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 \
    -subj /CN=draguard-cluster-ca >/dev/null 2>&1
  cert() {  # cert NAME SUBJECT [SAN]
    openssl req -newkey rsa:2048 -nodes -keyout "$d/$1.key" -out "$d/$1.csr" -subj "$2" >/dev/null 2>&1
    local ext=/dev/null
    if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" > "$d/$1.ext"; ext=$d/$1.ext; fi
    openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -out "$d/$1.crt" -days 2 -extfile "$ext" >/dev/null 2>&1
  }
  cert apiserver /CN=kube-apiserver "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=cluster-admin"
  cert kcm /CN=system:kube-controller-manager
  cert scheduler /CN=system:kube-scheduler
  openssl genrsa -out "$d/sa.key" 2048 >/dev/null 2>&1
}

kubeconfig() {  # kubeconfig DIR PORT USER
  cat <<KC
apiVersion: v1
kind: Config
clusters: [{name: draguard, cluster: {server: "https://127.0.0.1:$2", certificate-authority: "$1/pki/ca.crt"}}]
users: [{name: $3, user: {client-certificate: "$1/pki/$3.crt", client-key: "$1/pki/$3.key"}}]
contexts: [{name: draguard, context: {cluster: draguard, user: $3}}]
current-context: draguard
KC
}

up() {
  local dir=$1; shift
  local exports=()
  [ "${1:-}" = "--exports" ] || usage
  shift
  exports=("$@")
  [ "${#exports[@]}" -gt 0 ] || die "up: --exports needs at least one hwloc export"
  for e in "${exports[@]}"; do [ -f "$e" ] || die "up: export $e not found"; done
  mkdir -p "$dir/bin" "$dir/logs" "$dir/pids"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir/pids")" ] || die "up: $dir already has a running cluster (cluster.sh down $dir first)"
  local bin
  bin=$("$here/build.sh") || die "up: building the control plane failed"
  ln -sf "$bin" "$dir/bin/controlplane"
  ln -sf "$bin" "$dir/bin/kubectl"
  pki "$dir"
  rm -f "$dir/etcd.url"
  start "$dir" etcd --data-dir "$dir/etcd" --url-file "$dir/etcd.url"
  wait_for 60 etcd test -s "$dir/etcd.url" || die "up: etcd did not start (see $dir/logs/etcd.log)"
  local port attempt
  for attempt in 1 2 3; do
    port=$("$dir/bin/controlplane" free-port)
    kubeconfig "$dir" "$port" admin > "$dir/kubeconfig"
    kubeconfig "$dir" "$port" kcm > "$dir/kcm.kubeconfig"
    kubeconfig "$dir" "$port" scheduler > "$dir/scheduler.kubeconfig"
    start "$dir" kube-apiserver --etcd-servers="$(cat "$dir/etcd.url")" --secure-port="$port" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
      --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
      --client-ca-file="$dir/pki/ca.crt" --authorization-mode=Node,RBAC \
      --service-account-issuer=https://kubernetes.default.svc \
      --service-account-key-file="$dir/pki/sa.key" --service-account-signing-key-file="$dir/pki/sa.key" \
      --service-cluster-ip-range=10.96.0.0/16 --cert-dir="$dir/pki/apiserver-generated"
    if wait_for 120 kube-apiserver "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" get --raw /readyz; then
      break
    fi
    alive "$dir" kube-apiserver && die "up: kube-apiserver not ready after 120 s (see $dir/logs/kube-apiserver.log)"
    grep -q "address already in use" "$dir/logs/kube-apiserver.log" ||
      die "up: kube-apiserver failed (see $dir/logs/kube-apiserver.log)"
    [ "$attempt" -lt 3 ] || die "up: no free port for kube-apiserver after 3 attempts"
  done
  start "$dir" kube-controller-manager --kubeconfig="$dir/kcm.kubeconfig" --secure-port=0 \
    --leader-elect=false --controllers='*,-node-lifecycle-controller' --use-service-account-credentials \
    --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
    --cluster-signing-cert-file="$dir/pki/ca.crt" --cluster-signing-key-file="$dir/pki/ca.key"
  start "$dir" kube-scheduler --kubeconfig="$dir/scheduler.kubeconfig" --secure-port=0 --leader-elect=false
  local k=("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig")
  for e in "${exports[@]}"; do
    local name
    name=$(basename "$e"); name=${name%.xml}; name=${name%.hwloc}
    name=$(echo "$name" | tr 'A-Z_.+' 'a-z---' | cut -c1-63 | sed 's/-*$//')
    # A Node as an API object (no kubelet): capacity, and a Ready condition through the status.
    "${k[@]}" apply -f - > /dev/null <<NODE || die "up: creating Node $name failed"
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name, draguard.io/cluster-test: "true"}
NODE
    "${k[@]}" patch node "$name" --subresource=status --type=merge -p "$(printf '%s' \
      '{"status":{"capacity":{"cpu":"256","memory":"2Ti","pods":"110"},' \
      '"allocatable":{"cpu":"256","memory":"2Ti","pods":"110"},' \
      '"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated"}]}}')" \
      > /dev/null || die "up: setting the status of Node $name failed"
    # The TaintNodesByCondition admission plugin taints a new Node not-ready; the node-lifecycle
    # controller that would lift it once Ready is off, so lift it here.
    "${k[@]}" taint node "$name" node.kubernetes.io/not-ready:NoSchedule- > /dev/null ||
      die "up: removing the not-ready taint of Node $name failed"
  done
  for c in kube-controller-manager kube-scheduler; do
    alive "$dir" "$c" || die "up: $c exited (see $dir/logs/$c.log)"
  done
  echo "cluster.sh: up: kubeconfig $dir/kubeconfig, kubectl $dir/bin/kubectl" >&2
}

down() {
  local dir=$1 pid
  [ -d "$dir/pids" ] || return 0
  for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [ -f "$dir/pids/$c" ] || continue
    pid=$(cat "$dir/pids/$c")
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(date +%s) + 20 ))
    while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/pids/$c"
  done
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2; shift 2
case "$cmd" in
  up) up "$dir" "$@" || { down "$dir"; exit 1; } ;;
  down) down "$dir" ;;
  *) usage ;;
esac
