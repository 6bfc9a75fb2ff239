#!/usr/bin/env bash
# draguard side by side with the admission controllers a platform team would use instead, each
# enforcing the same rule (deny any container or init container with nvidia.com/gpu in its limits
# or requests) on this machine, in one run:
#   Kyverno    v1.19.1 (cmd/kyverno, the admission controller), a ValidatingPolicy (CEL):
#              bench/peers/kyverno-policy.yaml
#   Gatekeeper v3.23.1 (the manager: webhook and generate operations, no ValidatingAdmissionPolicy
#              generated), a ConstraintTemplate and Constraint:
#              bench/peers/gatekeeper-template.yaml; Rego (GATEKEEPER_ENGINE=rego, the default)
#              or CEL (GATEKEEPER_ENGINE=cel: K8sNativeValidation)
# Both are built from their Go modules at those releases (Kyverno through the wrapper module
# bench/peers/kyverno/, which repeats the replace line of its go.mod), cached outside the tree in
# ~/.cache/draguard-peers/ (PEERS_CACHE), and run as local processes against the control plane of
# test/cluster (cluster.sh up), with their CRDs from the same module versions. draguard runs as
# `draguard serve` with its default policy, as bench/load.sh runs it.
#
# First each server must deny the legacy GPU Pod of bench/data/review-legacy-gpu-8k.json and admit
# a DRA Pod (one GPU through a ResourceClaimTemplate), posted directly and through the apiserver.
# Then two measurements, ROUNDS rounds each (default 3), the order of the servers rotating from
# round to round:
#   webhook     the 8 KiB review posted over TLS to each server's validate endpoint (wrk -t2 -c32
#               -dDURATION, default 5s), nginx answering draguard's response as the limit:
#               requests/s, p50, p99, CPU time per request; each server's peak RSS at the end
#   create-50   Pod CREATE (server-side dry run, the DRA Pod) through kube-apiserver from 50 and
#   create-500  500 concurrent clients (wrk connections, a cluster-admin ServiceAccount token), with
#               one ValidatingWebhookConfiguration registered at a time (draguard, kyverno,
#               gatekeeper) or none; p50, p95, p99 of the create call and what each adds over none
# Output: per run a detail line; then per server and test the medians over the rounds as
#   <server> <test> requests/s N p50 X p99 Y        (latencies in ms)
# and per peer (kyverno, gatekeeper, and nginx/none where they are measured) and test
#   ratio <peer> <test> throughput R p99 R          (draguard over the peer)
# and for the create tests `added <server> <test> p50 X p95 Y p99 Z` (ms over none).
# PROFILE_DIR: kube-apiserver's CPU profile (4 s) of each create run of round 1 is written there.
# Usage: bench/peers.sh [--check] [path/to/draguard]   (default build/src/cli/draguard)
#   --check: exit 1 unless draguard's webhook throughput is at least 10x each peer's with a lower
#   p99, and the p99 it adds to a Pod CREATE at 50 clients is under 1 ms.
# Needs: wrk, nginx, python3; Go is test/cluster/go.sh's, as for the cluster harness (cold builds
# of the peers take minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
bin=${1:-$root/build/src/cli/draguard}
duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
conns=${CONNECTIONS:-32}
engine=${GATEKEEPER_ENGINE:-rego}
peers=${PEERS-kyverno gatekeeper}  # a subset runs only those
has() { [[ " $peers " == *" $1 "* ]]; }
kyverno_version=v1.19.1
gatekeeper_version=v3.23.1
cache=${PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draguard-peers}
go=$root/test/cluster/go.sh
for tool in wrk nginx python3 curl openssl; do
  command -v "$tool" >/dev/null || { echo "peers.sh: $tool not found" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "peers.sh: $bin not built (run scripts/build.sh)" >&2; exit 1; }
case "$engine" in rego|cel) ;; *) echo "peers.sh: GATEKEEPER_ENGINE is rego or cel" >&2; exit 2 ;; esac

# --- the peers' binaries, built once per version -------------------------------------------------
build_peers() {
  local kdir="$cache/kyverno-$kyverno_version" gdir="$cache/gatekeeper-$gatekeeper_version"
  mkdir -p "$kdir" "$gdir"
  if has kyverno && [ ! -x "$kdir/kyverno" ]; then
    echo "peers.sh: building Kyverno $kyverno_version (cold: many minutes)" >&2
    (cd "$root/bench/peers/kyverno" && "$go" build -trimpath -ldflags='-s -w' -o "$kdir/kyverno.tmp" \
      github.com/kyverno/kyverno/cmd/kyverno) && mv "$kdir/kyverno.tmp" "$kdir/kyverno"
  fi
  if has gatekeeper && [ ! -x "$gdir/gatekeeper" ]; then
    echo "peers.sh: building Gatekeeper $gatekeeper_version (cold: many minutes)" >&2
    # No replace line in its go.mod: go install takes it as released (the binary is named gatekeeper).
    (cd "$cache" && GOBIN="$gdir" "$go" install -trimpath -ldflags='-s -w' "github.com/open-policy-agent/gatekeeper/v3@$gatekeeper_version")
  fi
  kyverno_bin=$kdir/kyverno gatekeeper_bin=$gdir/gatekeeper
  # The CRDs of the same versions, from the module cache.
  if has kyverno; then
    kyverno_src=$(cd "$cache" && "$go" mod download -json "github.com/kyverno/kyverno@$kyverno_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  fi
  if has gatekeeper; then
    gatekeeper_src=$(cd "$cache" && "$go" mod download -json "github.com/open-policy-agent/gatekeeper/v3@$gatekeeper_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  fi
}
build_peers

tmp=$(mktemp -d /tmp/draguard-peers.XXXXXX)
cp "$bin" "$tmp/draguard"
bin=$tmp/draguard
cluster=$tmp/cluster
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  DRAGUARD=$bin "$root/test/cluster/cluster.sh" down "$cluster" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "peers.sh: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
DRAGUARD=$bin "$root/test/cluster/cluster.sh" up "$cluster" \
  --exports "$root/test/data/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml" 2> "$tmp/up.log" ||
  { cat "$tmp/up.log" >&2; exit 1; }
k=("$cluster/bin/kubectl" --kubeconfig "$cluster/kubeconfig")
api_port=$(cat "$cluster/apiserver.port")
free_port() { "$cluster/bin/controlplane" free-port; }
token=$(cat "$cluster/setup-sa/token")  # cluster-admin ServiceAccount (kube-system)
for ns in bench team-a kyverno gatekeeper-system; do "${k[@]}" create namespace "$ns" > /dev/null; done

# wait_until SECONDS WHAT COMMAND...
wait_until() {
  local deadline=$(( $(date +%s) + $1 )) seconds=$1 what=$2; shift 2
  until "$@" > /dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "peers.sh: $what: not ready after $seconds s" >&2; return 1; }
    sleep 0.5
  done
}

# --- the reviews and Pods ------------------------------------------------------------------------
legacy_review=$root/bench/data/review-legacy-gpu-8k.json
python3 - "$legacy_review" "$tmp" <<'PY'
import json, sys, copy
review = json.load(open(sys.argv[1]))
out = sys.argv[2]
dra = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dra-pod", "namespace": "bench"},
       "spec": {"containers": [{"name": "c", "image": "registry.example/cuda:12",
                                "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}
r = copy.deepcopy(review)
r["request"]["object"] = copy.deepcopy(dra)
r["request"]["object"]["metadata"]["namespace"] = r["request"]["namespace"]
r["request"]["name"] = "dra-pod"
json.dump(r, open(out + "/review-dra.json", "w"))
legacy = copy.deepcopy(review["request"]["object"])
legacy["metadata"] = {"name": "legacy-pod", "namespace": "bench"}
json.dump(legacy, open(out + "/pod-legacy.json", "w"))
json.dump(dra, open(out + "/pod-dra.json", "w"))
PY

# --- draguard and nginx ----------------------------------------------------------------------------
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"
dg_port=$(free_port)
GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES} "$bin" serve --listen "127.0.0.1:$dg_port" \
  --state-dir "$tmp/dg-state" --shutdown-delay 0 > "$tmp/draguard.log" 2>&1 &
dg_pid=$!; pids+=("$dg_pid")
wait_until 30 "draguard serve" curl -sf --cacert "$tmp/dg-state/ca.crt" "https://127.0.0.1:$dg_port/readyz" ||
  { cat "$tmp/draguard.log" >&2; exit 1; }
dg_url=https://127.0.0.1:$dg_port/validate
dg_ca=$(base64 -w0 "$tmp/dg-state/ca.crt")

response=$(curl -s --cacert "$tmp/dg-state/ca.crt" -H 'Content-Type: application/json' --data-binary @"$legacy_review" "$dg_url")
# nginx unescapes \\, \" and \' in a quoted string: escape them so that the body is draguard's, byte for byte.
escaped=$(printf '%s' "$response" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")
ng_port=$(free_port)
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx/nginx.conf" <<CONF
user root;
worker_processes 2;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  server {
    listen 127.0.0.1:$ng_port ssl;
    ssl_certificate $tmp/dg-state/tls.crt;
    ssl_certificate_key $tmp/dg-state/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 100000;
    client_max_body_size 8m;
    client_body_buffer_size 64k;
    location = /validate { default_type application/json; return 200 '$escaped'; }
  }
}
CONF
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
ng_pid=$!; pids+=("$ng_pid")
ng_url=https://127.0.0.1:$ng_port/validate
wait_until 10 nginx curl -sk -o /dev/null "https://127.0.0.1:$ng_port/"

# --- Kyverno -------------------------------------------------------------------------------------------
ky_url="" ky_ca="" ky_pid="" gk_url="" gk_ca="" gk_pid=""
if has kyverno; then
for d in kyverno policies.kyverno.io policyreport reports; do
  "${k[@]}" apply --server-side -f "$kyverno_src/config/crds/$d" > /dev/null
done
# Kyverno registers webhooks of its own for its policies; their objectSelector matches no Pod here,
# so that the benchmark's registration (below) is the only way to Kyverno.
"${k[@]}" -n kyverno create configmap kyverno \
  --from-literal=webhooks='{"objectSelector":{"matchLabels":{"bench.draguard.io/never":"true"}}}' > /dev/null
ky_port=$(free_port)
(export KYVERNO_NAMESPACE=kyverno KYVERNO_POD_NAME=kyverno-bench KYVERNO_DEPLOYMENT=kyverno-admission-controller \
   KYVERNO_SVC=kyverno-svc KYVERNO_SERVICEACCOUNT_NAME=kyverno-admission-controller INIT_CONFIG=kyverno \
   METRICS_CONFIG=kyverno-metrics
 exec "$kyverno_bin" --kubeconfig "$cluster/kubeconfig" --serverIP "127.0.0.1:$ky_port" \
   --webhookServerHost 127.0.0.1 --webhookServerPort "$ky_port" --caSecretName kyverno-svc.kyverno.svc.kyverno-tls-ca \
   --tlsSecretName kyverno-svc.kyverno.svc.kyverno-tls-pair --disableMetrics --metricsHost 127.0.0.1 \
   --metricsPort "$(free_port)" --controllerRuntimeMetricsAddress 0 --admissionReports=false \
   --profilePort "$(free_port)" --omitEvents PolicyApplied,PolicySkipped,PolicyViolation,PolicyError) \
  > "$tmp/kyverno.log" 2>&1 &
ky_pid=$!; pids+=("$ky_pid")
"${k[@]}" apply -f "$root/bench/peers/kyverno-policy.yaml" > /dev/null
# The path Kyverno serves the policy on, and its CA, from the webhook it registers for it.
ky_path() {
  "${k[@]}" get validatingwebhookconfigurations -o json | python3 -c '
import json, sys
for c in json.load(sys.stdin)["items"]:
    for w in c["webhooks"]:
        u = w["clientConfig"].get("url", "")
        if "/vpol/" in u and "no-legacy-gpu" in u:
            print(u.split("/", 3)[3]); sys.exit(0)
sys.exit(1)'
}
wait_until 120 "Kyverno's webhook for the policy" ky_path || { tail -30 "$tmp/kyverno.log" >&2; exit 1; }
ky_url=https://127.0.0.1:$ky_port/$(ky_path)
ky_ca=$("${k[@]}" -n kyverno get secret kyverno-svc.kyverno.svc.kyverno-tls-ca -o jsonpath='{.data.tls\.crt}')
fi

# --- Gatekeeper -----------------------------------------------------------------------------------------
if has gatekeeper; then
"${k[@]}" apply --server-side -f "$gatekeeper_src/charts/gatekeeper/crds" > /dev/null
mkdir -p "$tmp/gk-certs"
cp "$cluster/pki/draguard.crt" "$tmp/gk-certs/tls.crt"  # the harness CA's certificate for 127.0.0.1
cp "$cluster/pki/draguard.key" "$tmp/gk-certs/tls.key"
cp "$cluster/pki/ca.crt" "$tmp/gk-certs/ca.crt"
# Gatekeeper owns the status objects it writes by its own Pod: a Pod object stands in for it (no
# kubelet runs it).
"${k[@]}" -n gatekeeper-system run gatekeeper-bench --image=registry.example/gatekeeper:bench --restart=Never > /dev/null
gk_port=$(free_port)
native=false; [ "$engine" = cel ] && native=true
(export POD_NAMESPACE=gatekeeper-system POD_NAME=gatekeeper-bench KUBECONFIG=$cluster/kubeconfig
 exec "$gatekeeper_bin" --port "$gk_port" --host 127.0.0.1 --health-addr "127.0.0.1:$(free_port)" \
   --metrics-addr 0 --disable-cert-rotation --cert-dir "$tmp/gk-certs" --operation=webhook --operation=generate \
   --default-create-vap-for-templates=false --default-create-vap-binding-for-constraints=false \
   --enable-k8s-native-validation="$native" --log-level ERROR --shutdown-delay 0 \
   --prometheus-port "$(free_port)" --pprof-port "$(free_port)") > "$tmp/gatekeeper.log" 2>&1 &
gk_pid=$!; pids+=("$gk_pid")
gk_url=https://127.0.0.1:$gk_port/v1/admit
gk_ca=$(base64 -w0 "$cluster/pki/ca.crt")
wait_until 120 "Gatekeeper's ConstraintTemplate CRD" "${k[@]}" get crd constrainttemplates.templates.gatekeeper.sh
awk '/^---$/{exit} {print}' "$root/bench/peers/gatekeeper-template.yaml" | "${k[@]}" apply -f - > /dev/null
wait_until 120 "the constraint's CRD" "${k[@]}" get crd k8snolegacygpu.constraints.gatekeeper.sh
awk 'f{print} /^---$/{f=1}' "$root/bench/peers/gatekeeper-template.yaml" | "${k[@]}" apply -f - > /dev/null
fi

# --- the checks: each server denies the legacy Pod and admits the DRA Pod ----------------------------
# allowed URL REVIEW: prints true or false (the server's answer), nothing when it did not answer.
allowed() {
  curl -sk --max-time 10 -H 'Content-Type: application/json' --data-binary @"$2" "$1" |
    python3 -c 'import json,sys; print(str(json.load(sys.stdin)["response"]["allowed"]).lower())' 2>/dev/null
}
denies_legacy() { [ "$(allowed "$1" "$legacy_review")" = false ]; }
declare -A pid_of=([nginx]=$ng_pid [draguard]=$dg_pid [kyverno]=$ky_pid [gatekeeper]=$gk_pid)
declare -A url_of=([nginx]=$ng_url [draguard]=$dg_url [kyverno]=$ky_url [gatekeeper]=$gk_url)
for name in nginx draguard $peers; do
  url=${url_of[$name]}
  wait_until 120 "$name denying the legacy Pod's review" denies_legacy "$url" ||
    { tail -30 "$tmp/$name.log" >&2 2>/dev/null; exit 1; }
  [ "$name" = nginx ] && continue
  [ "$(allowed "$url" "$tmp/review-dra.json")" = true ] || { echo "peers.sh: $name does not admit the DRA Pod's review" >&2; exit 1; }
done
echo "check: draguard, $peers deny the legacy GPU Pod's review and admit the DRA Pod's"

# register SERVER: the benchmark's ValidatingWebhookConfiguration points at SERVER (none: deleted).
register() {
  local url ca
  "${k[@]}" delete validatingwebhookconfiguration bench-peer --ignore-not-found > /dev/null
  case "$1" in
    none) return 0 ;;
    draguard) url=$dg_url ca=$dg_ca ;;
    kyverno) url=$ky_url ca=$ky_ca ;;
    gatekeeper) url=$gk_url ca=$gk_ca ;;
  esac
  "${k[@]}" apply -f - > /dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: bench-peer
  labels: {bench.draguard.io/server: $1}
webhooks:
- name: validate.bench.draguard.io
  clientConfig: {url: "$url", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: bench}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10
YAML
}
# create_code POD: the HTTP status of a dry-run create of POD (a JSON file) in namespace bench.
create_code() {
  curl -sk -o "$tmp/create.out" -w '%{http_code}' -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    --data-binary @"$1" "https://127.0.0.1:$api_port/api/v1/namespaces/bench/pods?dryRun=All"
}
# registered SERVER: the apiserver calls SERVER (the legacy Pod is refused by it: 403 from draguard
# and Gatekeeper, 400 from Kyverno), or none.
registered() {
  local code; code=$(create_code "$tmp/pod-legacy.json")
  if [ "$1" = none ]; then [ "$code" = 201 ]; else [ "${code:0:1}" = 4 ] && grep -q 'webhook \\"validate.bench.draguard.io\\" denied' "$tmp/create.out"; fi
}
switch_to() {
  register "$1"
  wait_until 30 "the apiserver calling $1" registered "$1" || { cat "$tmp/create.out" >&2; exit 1; }
}
wait_until 60 "ServiceAccount bench/default" "${k[@]}" -n bench get serviceaccount default
for s in draguard $peers none; do
  switch_to "$s"
  code=$(create_code "$tmp/pod-dra.json")
  [ "$code" = 201 ] || { echo "peers.sh: through the apiserver, $s refused the DRA Pod ($code)" >&2; cat "$tmp/create.out" >&2; exit 1; }
done
echo "check: through kube-apiserver, each webhook refuses the legacy GPU Pod and admits the DRA Pod"

# --- the measurements --------------------------------------------------------------------------------
hz=$(getconf CLK_TCK)
cpu_ticks() {  # user + system clock ticks of a process and its children processes (nginx's workers)
  local total=0 p
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    [ -r "/proc/$p/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}
# wrk_run NAME URL BODY CONNECTIONS [HEADER]: sets rps, p50, p95, p99 (ms), requests and errors.
wrk_run() {
  local auth=""
  [ -n "${5:-}" ] && auth="wrk.headers[\"Authorization\"] = \"Bearer $5\""
  cat > "$tmp/post.lua" <<LUA
local f = io.open("$3", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/json"
$auth
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(95), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
LUA
  wrk -t2 -c"$4" -d"$duration" --timeout 10s -s "$tmp/post.lua" "$2" > "$tmp/run.wrk" 2>&1
  read -r requests dur_us p50 p95 p99 errors <<< "$(awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7}' "$tmp/run.wrk")"
  rps=$(python3 -c "print('%.0f' % ($requests * 1e6 / $dur_us))")
  p50=$(python3 -c "print('%.3f' % ($p50 / 1e3))") p95=$(python3 -c "print('%.3f' % ($p95 / 1e3))") p99=$(python3 -c "print('%.3f' % ($p99 / 1e3))")
}
declare -A R  # R[server,test,metric] = space-separated values, one per round
add() { R[$1,$2,$3]="${R[$1,$2,$3]:-} $4"; }
rotate() { local n=$1; shift; local a=("$@"); echo "${a[@]:n%${#a[@]}}" "${a[@]:0:n%${#a[@]}}"; }
echo "webhook: $(wc -c < "$legacy_review") bytes (legacy GPU Pod review), wrk -t2 -c$conns -d$duration, $rounds rounds"
for round in $(seq 1 "$rounds"); do
  for s in $(rotate $((round - 1)) nginx draguard $peers); do
    pid=${pid_of[$s]}
    c0=$(cpu_ticks "$pid")
    wrk_run "$s" "${url_of[$s]}" "$legacy_review" "$conns"
    c1=$(cpu_ticks "$pid")
    cpu=$(python3 -c "print('%.1f' % (($c1 - $c0) * 1e6 / $hz / max(1, $requests)))")
    printf '  round %d %-10s requests/s %8s  p50 %8sms  p99 %8sms  CPU/request %7sus  errors %s\n' \
      "$round" "$s" "$rps" "$p50" "$p99" "$cpu" "$errors"
    add "$s" webhook rps "$rps"; add "$s" webhook p50 "$p50"; add "$s" webhook p99 "$p99"; add "$s" webhook cpu "$cpu"
  done
done
for s in nginx draguard $peers; do
  rss=$(awk '/VmHWM/ {print $2}' "/proc/${pid_of[$s]}/status")
  [ "$s" = nginx ] && for p in $(pgrep -P "$ng_pid"); do rss=$((rss + $(awk '/VmHWM/ {print $2}' "/proc/$p/status"))); done
  R[$s,webhook,rss]=$rss
done

for clients in 50 500; do
  t=create-$clients
  echo "$t: Pod CREATE (dry run, DRA Pod) through kube-apiserver, wrk -t2 -c$clients -d$duration, $rounds rounds"
  for round in $(seq 1 "$rounds"); do
    for s in $(rotate $((round - 1)) none draguard $peers); do
      switch_to "$s"
      prof=""
      if [ -n "${PROFILE_DIR:-}" ] && [ "$round" = 1 ]; then  # kube-apiserver's CPU profile of the run
        mkdir -p "$PROFILE_DIR"
        "${k[@]}" get --raw "/debug/pprof/profile?seconds=4" > "$PROFILE_DIR/kube-apiserver-$s-$t.pprof" &
        prof=$!
      fi
      wrk_run "$s" "https://127.0.0.1:$api_port/api/v1/namespaces/bench/pods?dryRun=All" "$tmp/pod-dra.json" "$clients" "$token"
      [ -z "$prof" ] || wait "$prof" || true
      printf '  round %d %-10s requests/s %8s  p50 %8sms  p95 %8sms  p99 %8sms  errors %s\n' \
        "$round" "$s" "$rps" "$p50" "$p95" "$p99" "$errors"
      for m in rps p50 p95 p99; do add "$s" "$t" "$m" "${!m}"; done
      add "$s" "$t" errors "$errors"
    done
  done
done
register none

# --- the summary ------------------------------------------------------------------------------------
med() { python3 -c 'import statistics,sys; v=statistics.median(map(float, sys.argv[2:])); print(("%.0f" if sys.argv[1]=="rps" else "%.3f") % v)' "$@"; }
declare -A M
echo
for t in webhook create-50 create-500; do
  servers="nginx draguard $peers"; [ "$t" = webhook ] || servers="none draguard $peers"
  for s in $servers; do
    for m in rps p50 p95 p99; do
      [ -n "${R[$s,$t,$m]:-}" ] && M[$s,$t,$m]=$(med "$m" ${R[$s,$t,$m]})
    done
    echo "$s $t requests/s ${M[$s,$t,rps]} p50 ${M[$s,$t,p50]}ms p99 ${M[$s,$t,p99]}ms"
  done
done
for t in webhook create-50 create-500; do
  refs="nginx $peers"; [ "$t" = webhook ] || refs="none $peers"
  for p in $refs; do
    python3 -c "print('ratio $p $t throughput %.2f p99 %.2f' % (${M[draguard,$t,rps]} / ${M[$p,$t,rps]}, ${M[draguard,$t,p99]} / ${M[$p,$t,p99]}))"
  done
done
for t in create-50 create-500; do
  for s in draguard $peers; do
    python3 -c "print('added $s $t p50 %.3fms p95 %.3fms p99 %.3fms' % (${M[$s,$t,p50]} - ${M[none,$t,p50]}, ${M[$s,$t,p95]} - ${M[none,$t,p95]}, ${M[$s,$t,p99]} - ${M[none,$t,p99]}))"
  done
done
for s in nginx draguard $peers; do
  echo "$s webhook CPU/request $(med cpu ${R[$s,webhook,cpu]})us peak RSS ${R[$s,webhook,rss]} kB"
done
echo "versions: draguard $("$bin" version 2>/dev/null | head -1), Kyverno $kyverno_version, Gatekeeper $gatekeeper_version ($engine), kube-apiserver $("${k[@]}" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"

if [ "$check" = 1 ]; then
  failed=0
  for p in $peers; do
    python3 -c "import sys; sys.exit(0 if ${M[draguard,webhook,rps]} >= 10 * ${M[$p,webhook,rps]} and ${M[draguard,webhook,p99]} < ${M[$p,webhook,p99]} else 1)" ||
      { echo "check: FAILED: webhook: draguard's throughput is not 10x $p's with a lower p99"; failed=1; }
  done
  python3 -c "import sys; sys.exit(0 if ${M[draguard,create-50,p99]} - ${M[none,create-50,p99]} < 1 else 1)" ||
    { echo "check: FAILED: create-50: draguard adds 1 ms or more at p99"; failed=1; }
  [ "$failed" = 0 ] || exit 1
  echo "check: passed (webhook: draguard >= 10x each peer's throughput with a lower p99; create-50: < 1 ms added at p99)"
fi
