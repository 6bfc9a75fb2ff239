#!/usr/bin/env bash
# The real control plane of draguard's cluster tests, on loopback, as local processes.
#   cluster.sh up DIR [--cpu-mode M] [--nic-numa-attribute A] --exports PATH...
#                                         start etcd, kube-apiserver, kube-controller-manager and
#                                         kube-scheduler; one Node per hwloc export (named as
#                                         draguard names it: topology show), with the ResourceSlices
#                                         of its GPUs, NICs (with resource.kubernetes.io/numaNode when
#                                         A is standard) and, with --cpu-mode grouped|individual, CPUs
#   cluster.sh install DIR [HELM_ARGS...] helm install (or upgrade) of charts/draguard into namespace
#                                         draguard, and `draguard serve` started on the host with
#                                         the chart's TLS, policy and ServiceAccount token
#   cluster.sh kueue DIR CONFIG [--webhook-prefix P]
#                                         Kueue's manager (test/cluster/kueue: the release its go.mod
#                                         pins, built and cached) on the host with CONFIG, a Kueue
#                                         Configuration (its webhook, health, metrics, certificate
#                                         and leader-election settings are the harness's); its CRDs,
#                                         and its webhook configurations (named P..., default kueue-,
#                                         as its chart names them) pointing at it; returns once the
#                                         apiserver calls its webhooks. Again: restarted with CONFIG
#   cluster.sh jobset DIR                 JobSet's manager (the release Kueue requires, built beside
#                                         it) on the host, its CRD and its webhook configurations
#                                         (jobset-...) pointing at it, as kueue does
#   cluster.sh compute-domains DIR        the NVIDIA DRA driver's ComputeDomain CRDs, DeviceClasses and
#                                         controller RBAC from its chart, and its compute-domain
#                                         controller (built beside Kueue; with a root directory of its
#                                         own for its /templates);
#                                         returns once it reconciles a ComputeDomain
#   cluster.sh restart-apiserver DIR      kill kube-apiserver (SIGKILL, a crash) and start it again
#                                         with the same flags and port; returns once it is ready
#   cluster.sh down DIR                   stop (SIGKILL) everything up, install, kueue, jobset and
#                                         compute-domains started and
#                                         every process whose pid a caller wrote into DIR/pids/;
#                                         DIR may be deleted
# After up: DIR/kubeconfig (cluster-admin) and DIR/bin/kubectl (same release). Logs in DIR/logs/.
# Environment: DRAGUARD (the draguard binary; default build/src/cli/draguard of this checkout),
# HELM (default: test/unit/chart/find-helm.sh), CLUSTER_LIFELINE_FD (up: an open file descriptor,
# the read end of a pipe whose write end the caller keeps open while the cluster may live; once
# every writer has gone, however the caller ended, a reaper runs down DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The namespace of the release and of the topology ConfigMaps.
namespace=draguard
die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds, the deadline passes,
# or COMMAND exits 125 (it will never succeed).
wait_for() {
  local deadline=$(( $(date +%s) + $1 )) what=$2 rc; shift 2
  while :; do
    rc=0
    "$@" >/dev/null 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || break
    [ "$rc" -ne 125 ] && [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  echo "cluster.sh: $what ready" >&2
}

# start DIR NAME ARGS...: runs the control-plane binary as NAME in the background, pid in DIR/pids.
start() {
  local dir=$1 name=$2; shift 2
  "$dir/bin/controlplane" "$name" "$@" < /dev/null > "$dir/logs/$name.log" 2>&1 &
  echo "$!" > "$dir/pids/$name"
}

alive() { [ -f "$1/pids/$2" ] && running "$(cat "$1/pids/$2")"; }

# running PID: the process exists and is not a zombie (one nobody has reaped yet has ended).
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# cert DIR NAME SUBJECT [SAN]: DIR/pki/NAME.{key,crt} signed by the cluster CA.
cert() {
  local d=$1/pki ext=/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$d/$2.key" -out "$d/$2.csr" -subj "$3" >/dev/null 2>&1
  if [ -n "${4:-}" ]; then printf 'subjectAltName=%s\n' "$4" > "$d/$2.ext"; ext=$d/$2.ext; fi
  openssl x509 -req -in "$d/$2.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -out "$d/$2.crt" -days 2 -extfile "$ext" >/dev/null 2>&1
}

pki() {
  mkdir -p "$1/pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/pki/ca.key" -out "$1/pki/ca.crt" -days 2 \
    -subj /CN=draguard-cluster-ca >/dev/null 2>&1
  cert "$1" apiserver /CN=kube-apiserver "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
  cert "$1" admin "/O=system:masters/CN=cluster-admin"
  cert "$1" kcm /CN=system:kube-controller-manager
  cert "$1" scheduler /CN=system:kube-scheduler
  # The serving certificate of `draguard serve` on the host (install): the webhook URL, and the
  # names of the release's Service that serve requires of its certificate.
  cert "$1" draguard /CN=draguard \
    "IP:127.0.0.1,DNS:localhost,DNS:draguard,DNS:draguard.draguard,DNS:draguard.draguard.svc,DNS:draguard.draguard.svc.cluster.local"
  openssl genrsa -out "$1/pki/sa.key" 2048 >/dev/null 2>&1
}

draguard_bin() {
  local b=${DRAGUARD:-$root/build/src/cli/draguard}
  [ -x "$b" ] || die "no draguard binary at $b (build it, or set DRAGUARD)"
  echo "$b"
}

# sa_dir DIR OUT NAMESPACE SERVICEACCOUNT: OUT/{token,ca.crt,namespace} as a Pod of that
# ServiceAccount would have them mounted (for DRAGUARD_SERVICEACCOUNT_DIR).
sa_dir() {
  mkdir -p "$2"
  "$1/bin/kubectl" --kubeconfig "$1/kubeconfig" -n "$3" create token "$4" --duration=48h > "$2/token"
  cp "$1/pki/ca.crt" "$2/ca.crt"
  printf '%s' "$3" > "$2/namespace"
}

# in_cluster DIR SA_DIR COMMAND...: execs COMMAND with the in-cluster API environment of SA_DIR
# (call it in a subshell; the pid of a background one is then COMMAND's own).
in_cluster() {
  local dir=$1 sa=$2; shift 2
  exec env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$(cat "$dir/apiserver.port")" \
    DRAGUARD_SERVICEACCOUNT_DIR="$sa" "$@"
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

# node_name EXPORT: the Node of an export, named as draguard names it (k8s::NodeNameFrom): the
# file name without .xml / .hwloc.xml in lower case, kept when it is a DNS subdomain, else with
# every character other than a-z, 0-9 and - (`_`, `.`, `+`, ...) as -, cut to 63 characters and
# trimmed of - at both ends.
node_name() {
  local name label='[a-z0-9]([-a-z0-9]*[a-z0-9])?'
  name=$(basename "$1"); name=${name%.xml}; name=${name%.hwloc}
  name=$(printf '%s' "$name" | tr 'A-Z' 'a-z')
  if [ "${#name}" -le 253 ] && [[ "$name" =~ ^$label(\.$label)*$ ]]; then
    printf '%s\n' "$name"
    return
  fi
  printf '%s' "$name" | tr -c 'a-z0-9-' '-' | cut -c1-63 | sed 's/^-*//; s/-*$//'
}

# apiserver_ready DIR: kube-apiserver answers /readyz; 125 once the process is gone.
apiserver_ready() {
  alive "$1" kube-apiserver || return 125
  "$1/bin/kubectl" --kubeconfig "$1/kubeconfig" get --raw /readyz
}

up() {
  local dir=$1; shift
  local exports=() cpu_mode=none nic_numa=driver
  while [ $# -gt 0 ] && [ "$1" != "--exports" ]; do
    case "$1" in
      --cpu-mode) cpu_mode=${2:-}; shift 2 || usage
        case "$cpu_mode" in none|grouped|individual) ;; *) die "up: --cpu-mode must be none, grouped or individual";; esac ;;
      --nic-numa-attribute) nic_numa=${2:-}; shift 2 || usage
        case "$nic_numa" in driver|standard) ;; *) die "up: --nic-numa-attribute must be driver or standard";; esac ;;
      *) usage ;;
    esac
  done
  [ "${1:-}" = "--exports" ] || usage
  shift
  exports=("$@")
  [ "${#exports[@]}" -gt 0 ] || die "up: --exports needs at least one hwloc export"
  for e in "${exports[@]}"; do [ -f "$e" ] || die "up: export $e not found"; done
  mkdir -p "$dir/bin" "$dir/logs" "$dir/pids"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir/pids")" ] || die "up: $dir already has a running cluster (cluster.sh down $dir first)"
  start_reaper "$dir"
  local bin draguard
  draguard=$(draguard_bin)
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
    # Its flags, one per line, for restart-apiserver.
    printf '%s\n' --etcd-servers="$(cat "$dir/etcd.url")" --secure-port="$port" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
      --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
      --client-ca-file="$dir/pki/ca.crt" --authorization-mode=Node,RBAC --allow-privileged=true \
      --service-account-issuer=https://kubernetes.default.svc \
      --service-account-key-file="$dir/pki/sa.key" --service-account-signing-key-file="$dir/pki/sa.key" \
      --service-cluster-ip-range=10.96.0.0/16 --cert-dir="$dir/pki/apiserver-generated" > "$dir/apiserver.args"
    local api_args=()
    mapfile -t api_args < "$dir/apiserver.args"
    start "$dir" kube-apiserver "${api_args[@]}"
    if wait_for 120 kube-apiserver apiserver_ready "$dir"; then
      echo "$port" > "$dir/apiserver.port"
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
  # The release namespace, and a cluster-admin ServiceAccount whose token stands in for the
  # exporter DaemonSet's (installed later by the chart) when publishing the topologies below.
  { "${k[@]}" create namespace "$namespace" &&
    "${k[@]}" -n kube-system create serviceaccount draguard-cluster-setup &&
    "${k[@]}" create clusterrolebinding draguard-cluster-setup --clusterrole=cluster-admin \
      --serviceaccount=kube-system:draguard-cluster-setup &&
    sa_dir "$dir" "$dir/setup-sa" kube-system draguard-cluster-setup; } > /dev/null ||
    die "up: creating namespace $namespace and the setup ServiceAccount failed"
  "$draguard" topology slices --device-classes --cpu-mode "$cpu_mode" | "${k[@]}" apply -f - > /dev/null ||
    die "up: creating the drivers' DeviceClasses failed"
  for e in "${exports[@]}"; do
    local name
    name=$(node_name "$e")
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
    # The devices the DRA drivers would publish for this server.
    "$draguard" topology slices -f "$e" --node "$name" --cpu-mode "$cpu_mode" --nic-numa-attribute "$nic_numa" \
      2> "$dir/logs/slices-$name.log" |
      "${k[@]}" apply -f - > /dev/null || die "up: publishing the ResourceSlices of $name failed (see $dir/logs/slices-$name.log)"
    # The topology ConfigMap and the Node's shape label, as the exporter DaemonSet publishes them.
    (in_cluster "$dir" "$dir/setup-sa" "$draguard" topology export --publish -f "$e" --node "$name" \
      --namespace "$namespace" --once) >> "$dir/logs/publish.log" 2>&1 ||
      die "up: publishing the topology of $name failed (see $dir/logs/publish.log)"
  done
  for c in kube-controller-manager kube-scheduler; do
    alive "$dir" "$c" || die "up: $c exited (see $dir/logs/$c.log)"
  done
  # Pods are admitted once kube-controller-manager has made a namespace's default ServiceAccount.
  wait_for 60 "ServiceAccount default/default" "${k[@]}" -n default get serviceaccount default ||
    die "up: kube-controller-manager made no default ServiceAccount (see $dir/logs/kube-controller-manager.log)"
  echo "cluster.sh: up: kubeconfig $dir/kubeconfig, kubectl $dir/bin/kubectl" >&2
}

# stop DIR NAME: TERM, then KILL after 20 s, the process started as NAME (install replacing a
# running server).
stop() {
  local pid deadline
  [ -f "$1/pids/$2" ] || return 0
  pid=$(cat "$1/pids/$2")
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$(( $(date +%s) + 20 ))
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1/pids/$2"
}

# start_reaper DIR: with CLUSTER_LIFELINE_FD set, a process in a session of its own (a signal to
# the caller's process group does not reach it) that waits for the end of that pipe and then runs
# down DIR: a caller that panics, times out or is killed leaves nothing running.
start_reaper() {
  local dir=$1 fd=${CLUSTER_LIFELINE_FD:-}
  [ -n "$fd" ] || return 0
  [[ "$fd" =~ ^[0-9]+$ ]] && { true <&"$fd"; } 2>/dev/null || die "up: CLUSTER_LIFELINE_FD=$fd is not an open file descriptor"
  setsid "$0" reap "$dir" < /dev/null >> "$dir/logs/reaper.log" 2>&1 &
  echo "$!" > "$dir/reaper.pid"
}

# reap DIR: the reaper's body (see start_reaper).
reap() {
  local dir=$1 fd=$CLUSTER_LIFELINE_FD
  # read returns non-zero at end of file: once no process holds the write end open.
  while read -r -u "$fd" _; do :; done
  echo "cluster.sh: reap: the owner of $dir is gone; stopping the cluster"
  rm -f "$dir/reaper.pid"
  down "$dir"
}

# serve_args DIR PORT: the arguments of the chart's Deployment, one per line, with the paths of
# its volumes and its listen addresses replaced by their places on the host.
serve_args() {
  local dir=$1 port=$2 prev="" a
  while IFS= read -r a; do
    case "$prev" in
      --listen) a=127.0.0.1:$port ;;
      --metrics-listen) a=127.0.0.1:0 ;;
      --config) a=$dir/serve/policy.yaml ;;
      --tls-cert) a=$dir/serve/tls/tls.crt ;;
      --tls-key) a=$dir/serve/tls/tls.key ;;
      --state-dir) a=$dir/serve/state ;;
      --topology-dir) [ "${a#bundled:}" != "$a" ] || die "install: topology.source=directory needs a volume; use configmaps" ;;
      --client-ca) die "install: tls.clientAuth needs an apiserver AdmissionConfiguration the harness does not set" ;;
    esac
    printf '%s\n' "$a"
    prev=$a
  done
}

# serving DIR PORT: draguard serve answers /readyz, verified against the harness CA or, with
# tls.mode=self, the CA the server wrote into its state directory; 125 once the process is gone.
serving() {
  local ca=$1/pki/ca.crt
  alive "$1" draguard || return 125
  [ -f "$1/serve/state/self-tls/ca.crt" ] && ca=$1/serve/state/self-tls/ca.crt
  curl -sf --cacert "$ca" "https://127.0.0.1:$2/readyz"
}

install() {
  local dir=$1; shift
  [ -f "$dir/kubeconfig" ] && alive "$dir" kube-apiserver || die "install: no cluster in $dir (cluster.sh up first)"
  dir=$(cd "$dir" && pwd)
  local helm draguard k=("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig")
  draguard=$(draguard_bin)
  helm=${HELM:-$("$root/test/unit/chart/find-helm.sh")} || die "install: no helm (scripts/install-test-tools.sh installs it)"
  stop "$dir" draguard  # a second install replaces the running server
  mkdir -p "$dir/serve/tls" "$dir/serve/state"
  cp "$dir/pki/draguard.crt" "$dir/serve/tls/tls.crt"
  cp "$dir/pki/draguard.key" "$dir/serve/tls/tls.key"
  "${k[@]}" -n "$namespace" create secret tls draguard-serving --cert "$dir/serve/tls/tls.crt" \
    --key "$dir/serve/tls/tls.key" --dry-run=client -o yaml | "${k[@]}" apply -f - > /dev/null ||
    die "install: creating the serving Secret failed"
  local port attempt deploy sa
  for attempt in 1 2 3; do
    port=$("$dir/bin/controlplane" free-port)
    # The chart with its TLS in external mode (the harness's serving certificate for 127.0.0.1),
    # its webhooks pointing at the server on the host, and the published topology ConfigMaps.
    "$helm" upgrade --install draguard "$root/charts/draguard" --kubeconfig "$dir/kubeconfig" \
      --namespace "$namespace" --set tls.mode=external --set tls.external.secretName=draguard-serving \
      --set tls.external.caBundle="$(base64 -w0 "$dir/pki/ca.crt")" --set webhook.url="https://127.0.0.1:$port" \
      --set topology.source=configmaps --set kube.mode=on "$@" >> "$dir/logs/helm.log" 2>&1 ||
      die "install: helm install failed (see $dir/logs/helm.log)"
    deploy=$("${k[@]}" -n "$namespace" get deployment -l app.kubernetes.io/instance=draguard \
      -o jsonpath='{.items[0].metadata.name}') || die "install: the chart rendered no Deployment"
    sa=$("${k[@]}" -n "$namespace" get deployment "$deploy" -o jsonpath='{.spec.template.spec.serviceAccountName}')
    "${k[@]}" -n "$namespace" get configmap "$deploy-policy" -o jsonpath='{.data.policy\.yaml}' \
      > "$dir/serve/policy.yaml" || die "install: reading the policy ConfigMap $deploy-policy failed"
    sa_dir "$dir" "$dir/serve/sa" "$namespace" "$sa" || die "install: no token for ServiceAccount $sa"
    local args=()
    mapfile -t args < <("${k[@]}" -n "$namespace" get deployment "$deploy" \
      -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}' | serve_args "$dir" "$port")
    [ "${#args[@]}" -gt 0 ] || die "install: the Deployment $deploy has no arguments"
    echo "$port" > "$dir/serve.port"
    # The pid recorded is draguard's own (in_cluster execs it), so that stop and down reach it.
    (export POD_NAME=draguard-host POD_NAMESPACE=$namespace
     in_cluster "$dir" "$dir/serve/sa" "$draguard" "${args[@]}") < /dev/null > "$dir/logs/draguard.log" 2>&1 &
    echo "$!" > "$dir/pids/draguard"
    if wait_for 60 "draguard serve" serving "$dir" "$port"; then
      echo "cluster.sh: install: draguard serves https://127.0.0.1:$port (log $dir/logs/draguard.log)" >&2
      return 0
    fi
    alive "$dir" draguard && die "install: draguard serve not ready after 60 s (see $dir/logs/draguard.log)"
    grep -q -i "address already in use\|cannot listen" "$dir/logs/draguard.log" ||
      die "install: draguard serve exited (see $dir/logs/draguard.log)"
    rm -f "$dir/pids/draguard"
  done
  die "install: no free port for draguard serve after 3 attempts"
}

# kueue_metrics_certs: Kueue's manager, when it does not manage its own certificates, loads a
# metrics certificate from the fixed path /etc/kueue/metrics/certs at start, even with its metrics
# server off (cmd/kueue/main.go); a self-signed pair is put there once (it is never served).
kueue_metrics_certs() {
  local d=/etc/kueue/metrics/certs
  [ -s "$d/tls.crt" ] && [ -s "$d/tls.key" ] && return 0
  mkdir -p "$d" 2>/dev/null || die "kueue: cannot create $d (Kueue's manager reads its metrics certificate there; run as root once)"
  (
    flock 7
    [ -s "$d/tls.crt" ] && [ -s "$d/tls.key" ] && exit 0
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/.tls.key.tmp" -out "$d/.tls.crt.tmp" -days 3650 \
      -subj /CN=kueue-metrics-unused >/dev/null 2>&1
    mv "$d/.tls.key.tmp" "$d/tls.key"
    mv "$d/.tls.crt.tmp" "$d/tls.crt"
  ) 7> "$d/.lock" || die "kueue: writing the metrics certificate into $d failed"
}

# manager_ready DIR NAME PORT: the manager's /readyz answers (its webhook server serves); 125 once
# it is gone.
manager_ready() {
  alive "$1" "$2" || return 125
  curl -sf "http://127.0.0.1:$3/readyz"
}

# kueue_webhooks_called DIR: the apiserver calls Kueue's webhooks: a Job with a queue name comes
# back suspended from a server-side dry run (namespace default).
kueue_webhooks_called() {
  local suspended
  suspended=$("$1/bin/kubectl" --kubeconfig "$1/kubeconfig" -n default create --dry-run=server \
    -o jsonpath='{.spec.suspend}' -f - <<'JOB'
apiVersion: batch/v1
kind: Job
metadata: {name: kueue-webhook-probe, labels: {kueue.x-k8s.io/queue-name: probe}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: probe, image: probe}]
JOB
) && [ "$suspended" = true ]
}

# jobset_webhooks_called DIR: the apiserver calls JobSet's webhooks: a JobSet comes back from a
# server-side dry run with the network settings only its defaulting webhook sets.
jobset_webhooks_called() {
  local published
  published=$("$1/bin/kubectl" --kubeconfig "$1/kubeconfig" -n default create --dry-run=server \
    -o jsonpath='{.spec.network.publishNotReadyAddresses}' -f - <<'JOBSET'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: jobset-webhook-probe}
spec:
  replicatedJobs:
  - name: probe
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: probe, image: probe}]
JOBSET
) && [ "$published" = true ]
}

# manager_stop DIR NAME: stops the manager NAME (kueue, jobset) and removes its webhook
# configurations (their failurePolicy Fail would refuse what they select while it is down).
manager_stop() {
  stop "$1" "$2"
  if [ -f "$1/$2/webhook-configurations" ]; then
    "$1/bin/kubectl" --kubeconfig "$1/kubeconfig" delete -f "$1/$2/webhook-configurations" --ignore-not-found \
      > /dev/null || die "$2: removing the webhook configurations failed"
    rm -f "$1/$2/webhook-configurations"
  fi
}

# manager DIR NAME PREFIX CONFIG...: builds (test/cluster/kueue/build.sh, cached) and starts the
# manager NAME (kueue, jobset) on the host: its webhook server on a free port with a certificate of
# the harness CA, its CRDs (conversion webhooks at that port) applied before it starts, which
# watches them, its webhook configurations (named PREFIX...) once it serves, so that no admission
# waits on a manager not up; returns once the apiserver calls them. CONFIG: the helper's
# configuration subcommand and its arguments (without ports and certificate directory).
manager() {
  local dir=$1 name=$2 prefix=$3; shift 3
  local k=("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig") out helper
  local manifests=manifests configdir port health attempt url
  out=$("$here/kueue/build.sh") || die "$name: building Kueue and JobSet failed"
  helper=$out/bin/kueue-harness configdir=$out/config
  if [ "$name" = jobset ]; then manifests=jobset-manifests configdir=$out/config/jobset; fi
  manager_stop "$dir" "$name"  # a second call restarts it
  mkdir -p "$dir/$name/certs"
  [ -f "$dir/pki/$name.crt" ] || cert "$dir" "$name" "/CN=$name" "IP:127.0.0.1,DNS:localhost"
  cp "$dir/pki/$name.crt" "$dir/$name/certs/tls.crt"
  cp "$dir/pki/$name.key" "$dir/$name/certs/tls.key"
  for attempt in 1 2 3; do
    port=$("$dir/bin/controlplane" free-port)
    health=$("$dir/bin/controlplane" free-port)
    url=https://127.0.0.1:$port
    "$helper" "$@" -webhook-port "$port" -health-port "$health" -cert-dir "$dir/$name/certs" \
      > "$dir/$name/config.yaml" || die "$name: the configuration cannot be used"
    # Server-side: Kueue's Workload CRD is too large for client-side apply's annotation.
    "$helper" "$manifests" -config-dir "$configdir" -url "$url" -ca-bundle "$dir/pki/ca.crt" -part crds \
      > "$dir/$name/crds.yaml" || die "$name: writing the CRDs failed"
    "${k[@]}" apply --server-side --force-conflicts -f "$dir/$name/crds.yaml" > /dev/null ||
      die "$name: applying the CRDs failed"
    "${k[@]}" wait --for condition=established --timeout=60s -f "$dir/$name/crds.yaml" > /dev/null ||
      die "$name: the CRDs are not established"
    "$out/bin/$name" --config "$dir/$name/config.yaml" --kubeconfig "$dir/kubeconfig" \
      < /dev/null > "$dir/logs/$name.log" 2>&1 &
    echo "$!" > "$dir/pids/$name"
    if wait_for 120 "$name's manager" manager_ready "$dir" "$name" "$health"; then break; fi
    alive "$dir" "$name" && die "$name: the manager is not ready after 120 s (see $dir/logs/$name.log)"
    grep -q "address already in use" "$dir/logs/$name.log" || die "$name: the manager exited (see $dir/logs/$name.log)"
    rm -f "$dir/pids/$name"
    [ "$attempt" -lt 3 ] || die "$name: no free ports for the manager after 3 attempts"
  done
  "$helper" "$manifests" -config-dir "$configdir" -url "$url" -ca-bundle "$dir/pki/ca.crt" -prefix "$prefix" \
    -part webhooks > "$dir/$name/webhook-configurations" || die "$name: writing the webhook configurations failed"
  "${k[@]}" apply --server-side --force-conflicts -f "$dir/$name/webhook-configurations" > /dev/null ||
    die "$name: applying the webhook configurations failed"
  wait_for 30 "$name's webhooks" "${name}_webhooks_called" "$dir" ||
    die "$name: the apiserver does not call the webhooks (see $dir/logs/$name.log)"
  echo "cluster.sh: $name: the manager serves $url (log $dir/logs/$name.log)" >&2
}

# with_cluster DIR: DIR holds a running cluster; prints its absolute path.
with_cluster() {
  [ -f "$1/kubeconfig" ] && alive "$1" kube-apiserver || die "no cluster in $1 (cluster.sh up first)"
  (cd "$1" && pwd)
}

kueue() {
  local dir=$1 config=${2:-} prefix=kueue-
  [ -n "$config" ] || usage
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
      --webhook-prefix) prefix=${2:-}; [ -n "$prefix" ] || usage; shift 2 ;;
      *) usage ;;
    esac
  done
  [ -f "$config" ] || die "kueue: configuration $config not found"
  dir=$(with_cluster "$dir")
  kueue_metrics_certs
  "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" get namespace kueue-system > /dev/null 2>&1 ||
    "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" create namespace kueue-system > /dev/null ||
    die "kueue: creating namespace kueue-system failed"
  manager "$dir" kueue "$prefix" config -in "$config"
}

jobset() {
  [ $# -eq 1 ] || usage
  local dir
  dir=$(with_cluster "$1")
  manager "$dir" jobset jobset- jobset-config
}

# The namespace and release name of the NVIDIA DRA driver's chart, as its documentation installs it.
driver_namespace=nvidia-dra-driver-gpu

# compute_domains_called DIR: the compute-domain controller reconciles: a ComputeDomain in the
# driver's namespace gets its channel ResourceClaimTemplate (labelled with the domain's UID), and
# once deleted it is gone, the controller having removed its finalizer.
compute_domains_called() {
  local k=("$1/bin/kubectl" --kubeconfig "$1/kubeconfig" -n "$driver_namespace") uid
  alive "$1" compute-domain-controller || return 125
  "${k[@]}" apply -f - > /dev/null <<'CD' || return 1
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: harness-probe}
spec: {numNodes: 0, channel: {resourceClaimTemplate: {name: harness-probe-channel}}}
CD
  uid=$("${k[@]}" get computedomain harness-probe -o jsonpath='{.metadata.uid}') || return 1
  [ "$("${k[@]}" get resourceclaimtemplate harness-probe-channel -o \
    jsonpath='{.metadata.labels.resource\.nvidia\.com/computeDomain}' 2>/dev/null)" = "$uid" ] || return 1
  "${k[@]}" delete computedomain harness-probe --wait=true --timeout=30s > /dev/null
}

# compute_domains DIR: the NVIDIA DRA driver's ComputeDomain support as its chart installs it,
# without the kubelet plugins (no kubelet runs here): the chart's CRDs, its ComputeDomain
# DeviceClasses and the controller's RBAC (helm template of the chart at the release
# kueue/build.sh built), and the compute-domain controller running under that ServiceAccount.
# The controller reads its templates from /templates, so it runs with DIR/compute-domains/root as
# its root directory (a chroot as root, else a user namespace), which holds them, the static binary
# and the ServiceAccount's token where a Pod has it mounted.
compute_domains() {
  [ $# -eq 1 ] || usage
  local dir helm out chart release sa jail port jailer
  dir=$(with_cluster "$1")
  local k=("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig")
  helm=${HELM:-$("$root/test/unit/chart/find-helm.sh")} || die "compute-domains: no helm (scripts/install-test-tools.sh installs it)"
  out=$("$here/kueue/build.sh") || die "compute-domains: building the controller failed"
  chart=$out/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu
  release=$(cat "$out/dra-driver-nvidia-gpu/release")
  stop "$dir" compute-domain-controller  # a second call restarts it
  mkdir -p "$dir/compute-domains"
  "${k[@]}" get namespace "$driver_namespace" > /dev/null 2>&1 || "${k[@]}" create namespace "$driver_namespace" > /dev/null ||
    die "compute-domains: creating namespace $driver_namespace failed"
  "${k[@]}" apply --server-side --force-conflicts -f "$chart/crds" > /dev/null || die "compute-domains: applying the chart's CRDs failed"
  "${k[@]}" wait --for condition=established --timeout=60s -f "$chart/crds" > /dev/null ||
    die "compute-domains: the chart's CRDs are not established"
  # The GPU DeviceClasses are the harness's (up); the chart refuses resources.gpus.enabled without
  # an override while KEP-5004 is not GA in its eyes, and nothing here needs its GPU parts.
  "$helm" template "$driver_namespace" "$chart" --namespace "$driver_namespace" --kube-version 1.37.0 \
    --api-versions resource.k8s.io/v1 --set resources.gpus.enabled=false \
    --show-only templates/deviceclass-compute-domain-default-channel.yaml \
    --show-only templates/deviceclass-compute-domain-daemon.yaml --show-only templates/rbac-controller.yaml \
    > "$dir/compute-domains/chart.yaml" || die "compute-domains: helm template of the driver's chart failed"
  "${k[@]}" apply --server-side --force-conflicts -f "$dir/compute-domains/chart.yaml" > /dev/null ||
    die "compute-domains: applying the chart's DeviceClasses and RBAC failed"
  sa=$("${k[@]}" get -f "$dir/compute-domains/chart.yaml" -o jsonpath='{range .items[?(@.kind=="ServiceAccount")]}{.metadata.name}{end}')
  [ -n "$sa" ] || die "compute-domains: the chart rendered no ServiceAccount for the controller"
  jail=$dir/compute-domains/root
  rm -rf "$jail"
  mkdir -p "$jail/templates" "$jail/tmp" "$jail/var/run/secrets/kubernetes.io"
  cp "$out/bin/compute-domain-controller" "$jail/"
  cp "$out/dra-driver-nvidia-gpu/templates/"* "$jail/templates/"
  sa_dir "$dir" "$jail/var/run/secrets/kubernetes.io/serviceaccount" "$driver_namespace" "$sa"
  port=$(cat "$dir/apiserver.port")
  # As root a chroot; otherwise a user namespace in which the caller is root (util-linux unshare).
  if [ "$(id -u)" -eq 0 ]; then
    jailer=("$(command -v chroot)" "$jail")
  else
    jailer=("$(command -v unshare)" --user --map-root-user "--root=$jail")
  fi
  [ -x "${jailer[0]}" ] || die "compute-domains: no chroot or unshare to run the controller with /templates"
  # The chart's Deployment's environment (templates/controller.yaml): no metrics endpoint, one
  # replica without leader election.
  env -i KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$port" POD_NAME=compute-domain-controller-0 \
    NAMESPACE="$driver_namespace" IMAGE_NAME="registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:$release" \
    LOG_VERBOSITY_CD_DAEMON=4 LEADER_ELECTION_ENABLED=false \
    "${jailer[@]}" /compute-domain-controller -v 4 < /dev/null > "$dir/logs/compute-domain-controller.log" 2>&1 &
  echo "$!" > "$dir/pids/compute-domain-controller"
  wait_for 60 "the compute-domain controller" compute_domains_called "$dir" ||
    die "compute-domains: the controller does not reconcile ComputeDomains (see $dir/logs/compute-domain-controller.log)"
  echo "cluster.sh: compute-domains: the compute-domain controller of dra-driver-nvidia-gpu $release runs as $driver_namespace/$sa (log $dir/logs/compute-domain-controller.log)" >&2
}

restart_apiserver() {
  local dir=$1 api_args=()
  [ -f "$dir/apiserver.args" ] && alive "$dir" kube-apiserver || die "restart-apiserver: no cluster in $dir"
  kill -KILL "$(cat "$dir/pids/kube-apiserver")" 2>/dev/null || true
  wait_for 20 "kube-apiserver gone" sh -c '! kill -0 "$1" 2>/dev/null' sh "$(cat "$dir/pids/kube-apiserver")" ||
    die "restart-apiserver: kube-apiserver survived SIGKILL"
  mapfile -t api_args < "$dir/apiserver.args"
  start "$dir" kube-apiserver "${api_args[@]}"
  wait_for 120 kube-apiserver apiserver_ready "$dir" ||
    die "restart-apiserver: kube-apiserver not ready after 120 s (see $dir/logs/kube-apiserver.log)"
}

# down DIR: SIGKILL to every process of DIR/pids at once (the tests need no graceful shutdown:
# kube-apiserver's alone takes up to a minute), waits until each is gone, and stops the reaper.
down() {
  local dir=$1 f pid pids=() deadline
  [ -d "$dir/pids" ] || return 0
  for f in "$dir"/pids/*; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    [[ "$pid" =~ ^[0-9]+$ ]] && pids+=("$pid")
    kill -KILL "$pid" 2>/dev/null || true
  done
  deadline=$(( $(date +%s) + 20 ))
  for pid in "${pids[@]}"; do
    while running "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
  done
  rm -f "$dir"/pids/*
  if [ -f "$dir/reaper.pid" ]; then
    kill -TERM "$(cat "$dir/reaper.pid")" 2>/dev/null || true
    rm -f "$dir/reaper.pid"
  fi
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2; shift 2
case "$cmd" in
  # In a subshell each, so that a failing step (die, or set -e) stops what the command started.
  up) set +e; (set -e; up "$dir" "$@"); rc=$?; set -e; [ "$rc" -eq 0 ] || { down "$dir"; exit 1; } ;;
  install) set +e; (set -e; install "$dir" "$@"); rc=$?; set -e; [ "$rc" -eq 0 ] || { stop "$dir" draguard; exit 1; } ;;
  kueue) set +e; (set -e; kueue "$dir" "$@"); rc=$?; set -e; [ "$rc" -eq 0 ] || { manager_stop "$dir" kueue; exit 1; } ;;
  compute-domains) set +e; (set -e; compute_domains "$dir" "$@"); rc=$?; set -e; [ "$rc" -eq 0 ] || { stop "$dir" compute-domain-controller; exit 1; } ;;
  jobset) set +e; (set -e; jobset "$dir" "$@"); rc=$?; set -e; [ "$rc" -eq 0 ] || { manager_stop "$dir" jobset; exit 1; } ;;
  restart-apiserver) restart_apiserver "$dir" ;;
  down) down "$dir" ;;
  reap) reap "$dir" ;;
  *) usage ;;
esac
