#!/usr/bin/env bash
# draguard side by side with the admission controllers a platform team would use instead, each
# enforcing the same rule (deny any container or init container with nvidia.com/gpu in its limits
# or requests) on this machine, and with nginx as the floor (what any webhook costs), in one run:
#   Kyverno    v1.19.1 (cmd/kyverno, the admission controller), a ValidatingPolicy (CEL):
#              bench/peers/kyverno-policy.yaml
#   Gatekeeper v3.23.1 (the manager: webhook and generate operations, no ValidatingAdmissionPolicy
#              generated), a ConstraintTemplate and Constraint:
#              bench/peers/gatekeeper-template.yaml; Rego (GATEKEEPER_ENGINE=rego, the default)
#              or CEL (GATEKEEPER_ENGINE=cel: K8sNativeValidation)
#   nginx      (Debian's, with its echo module) over the same TLS certificate as draguard,
#              offering h2 and http/1.1 like the Go servers: /validate answers the fixed allow
#              answer and /mutate the fixed patch draguard gives the legacy GPU Pod, each with the
#              request's uid (the API server checks it); the Pod named legacy-pod is refused, so
#              that the checks can tell that nginx is being called
# Both peers are built from their Go modules at those releases (Kyverno through the wrapper module
# bench/peers/kyverno/, which repeats the replace line of its go.mod), cached outside the tree in
# ~/.cache/draguard-peers/ (PEERS_CACHE), and run as local processes against the control plane of
# test/cluster (cluster.sh up), with their CRDs from the same module versions. draguard runs as
# `draguard serve` with its default policy, as bench/load.sh runs it. The load generator of the
# API server tests is bench/peers/load (Go, standard library only), built into the same cache.
#
# First each server must deny the legacy GPU Pod of bench/data/review-legacy-gpu-8k.json and admit
# a DRA Pod (one GPU through a ResourceClaimTemplate), posted directly and through the apiserver
# (nginx: admit the DRA Pod and, as a mutating webhook, convert the legacy Pod). Then ROUNDS rounds
# (default 3) of each test, the order of the servers rotating from round to round:
#   webhook     the 8 KiB review posted over TLS to each server's validate endpoint (wrk -t2 -c32
#               -dDURATION, default 5s), nginx answering draguard's response without reading the
#               body as the limit: requests/s, p50, p99, CPU time per request; peak RSS at the end
#   create-50   Pod CREATE (server-side dry run, the DRA Pod) through kube-apiserver from 50 and
#   create-500  500 closed-loop clients for DURATION
#   open-100    the same Pod CREATE at a fixed rate of 100/s and 400/s for OPEN_DURATION (default
#   open-400    20s), open loop: each request is sent when due whatever the answers, its latency
#               counted from when it was due; requests the generator sent more than 10 ms late
#               are counted
#   with one ValidatingWebhookConfiguration registered at a time (none, nginx, draguard, kyverno,
#   gatekeeper; a loopback URL, failurePolicy Fail) and a cluster-admin ServiceAccount token.
#   Latencies are of 2xx answers; non-2xx answers, transport errors and late requests are counted
#   apart. Each run also reports the TCP connections opened to the webhook per second (from ss:
#   each is a full TLS handshake, kube-apiserver's client keeps no session cache), the protocol
#   kube-apiserver speaks to it, and the CPU time per create of kube-apiserver and of the webhook.
# Output: per run a detail line; then per server and test the medians over the rounds as
#   <server> <test> requests/s N p50 X p99 Y        (latencies in ms)
#   failures <server> <test> non-2xx N errors N late N   (sums over the rounds)
# per peer (kyverno, gatekeeper, nginx and none) and test
#   ratio <peer> <test> throughput R p99 R          (draguard over the peer)
# and for the API server tests, per server, `added <server> <test> p50 X p99 Y` (ms over none).
# kube-apiserver calls a webhook at a loopback URL over HTTP/2 when the webhook offers it, and any
# other webhook (a Service, a remote URL) over HTTP/1.1 only (k8s.io/apiserver
# pkg/util/webhook/client.go); APISERVER_HTTP1=1 starts it with DISABLE_HTTP2=1, so that it
# speaks HTTP/1.1 to every webhook, as in a cluster.
# PROFILE_DIR: kube-apiserver's CPU profile (4 s) of each API server run of round 1 is written there.
# TESTS: a subset of the tests (default: webhook create-50 create-500 open-100 open-400).
# DRAGUARD_ARGS: extra flags of draguard serve (e.g. --http2=false).
# Usage: bench/peers.sh [--check] [path/to/draguard]   (default build/src/cli/draguard)
#   --check: exit 1 unless at every API server test draguard's throughput is at least each peer's
#   and 0.95x nginx's, its added p99 on open-100 and open-400 at most nginx's + 1 ms, and on the
#   webhook test its throughput at least 10x each peer's with a lower p99.
# Needs: wrk, nginx and its echo module (libnginx-mod-http-echo), python3, ss; Go is
# test/cluster/go.sh's, as for the cluster harness (the load generator and the peers; cold builds
# of the peers take many minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
bin=${1:-$root/build/src/cli/draguard}
duration=${DURATION:-5s}
open_duration=${OPEN_DURATION:-20s}
rounds=${ROUNDS:-3}
tests=${TESTS:-webhook create-50 create-500 open-100 open-400}
want() { [[ " $tests " == *" $1 "* ]]; }
conns=${CONNECTIONS:-32}
engine=${GATEKEEPER_ENGINE:-rego}
peers=${PEERS-kyverno gatekeeper}  # a subset runs only those
has() { [[ " $peers " == *" $1 "* ]]; }
kyverno_version=v1.19.1
gatekeeper_version=v3.23.1
cache=${PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draguard-peers}
go=$root/test/cluster/go.sh
for tool in wrk nginx python3 curl openssl ss; do
  command -v "$tool" >/dev/null || { echo "peers.sh: $tool not found" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "peers.sh: $bin not built (run scripts/build.sh)" >&2; exit 1; }
echo_module=/usr/lib/nginx/modules/ngx_http_echo_module.so
[ -f "$echo_module" ] || { echo "peers.sh: nginx's echo module not found (apt-get install libnginx-mod-http-echo)" >&2; exit 1; }
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
  # The load generator (standard library only): cheap to build, rebuilt when its source changes.
  load_bin=$cache/load-$(sha256sum "$root/bench/peers/load/main.go" | cut -c1-12)
  if [ ! -x "$load_bin" ]; then
    (cd "$root/bench/peers/load" && "$go" build -trimpath -o "$load_bin.tmp" .) && mv "$load_bin.tmp" "$load_bin"
  fi
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
apiserver_env=()
[ "${APISERVER_HTTP1:-0}" = 1 ] && apiserver_env=(DISABLE_HTTP2=1)
env "${apiserver_env[@]}" DRAGUARD=$bin "$root/test/cluster/cluster.sh" up "$cluster" \
  --exports "$root/test/data/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml" 2> "$tmp/up.log" ||
  { cat "$tmp/up.log" >&2; exit 1; }
k=("$cluster/bin/kubectl" --kubeconfig "$cluster/kubeconfig")
api_port=$(cat "$cluster/apiserver.port")
api_pid=$(cat "$cluster/pids/kube-apiserver")
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
# As kube-apiserver's defaulting leaves it before the webhooks see it: requests copied from limits.
for c in legacy["spec"].get("containers", []) + legacy["spec"].get("initContainers", []):
    res = c.get("resources", {})
    if "limits" in res:
        res["requests"] = {**res["limits"], **res.get("requests", {})}
json.dump(legacy, open(out + "/pod-legacy.json", "w"))
r = copy.deepcopy(review)
r["request"]["object"] = copy.deepcopy(legacy)
json.dump(r, open(out + "/review-legacy-defaulted.json", "w"))
json.dump(dra, open(out + "/pod-dra.json", "w"))
PY

# --- draguard and nginx ----------------------------------------------------------------------------
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"
dg_port=$(free_port)
# shellcheck disable=SC2086  # DRAGUARD_ARGS: extra serve flags, split on spaces (as in bench/load.sh)
GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES} "$bin" serve --listen "127.0.0.1:$dg_port" \
  --state-dir "$tmp/dg-state" --shutdown-delay 0 ${DRAGUARD_ARGS:-} > "$tmp/draguard.log" 2>&1 &
dg_pid=$!; pids+=("$dg_pid")
wait_until 30 "draguard serve" curl -sf --cacert "$tmp/dg-state/ca.crt" "https://127.0.0.1:$dg_port/readyz" ||
  { cat "$tmp/draguard.log" >&2; exit 1; }
dg_url=https://127.0.0.1:$dg_port/validate
dg_ca=$(base64 -w0 "$tmp/dg-state/ca.crt")

response=$(curl -s --cacert "$tmp/dg-state/ca.crt" -H 'Content-Type: application/json' --data-binary @"$legacy_review" "$dg_url")
# nginx unescapes \\, \" and \' in a quoted string: escape them so that the body is draguard's, byte for byte.
nginx_quote() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g"; }
escaped=$(nginx_quote "$response")
# As a webhook behind kube-apiserver: the fixed allow answer, and the fixed patch draguard's /mutate
# gives the legacy GPU Pod (as defaulted by the apiserver), with the request's uid put in (the first "uid" of a review is
# request.uid); the probe Pod legacy-pod is refused.
mutated=$(curl -s --cacert "$tmp/dg-state/ca.crt" -H 'Content-Type: application/json' --data-binary @"$tmp/review-legacy-defaulted.json" \
  "https://127.0.0.1:$dg_port/mutate")
mutate_answer=$(printf '%s' "$mutated" | python3 -c '
import json, sys
r = json.load(sys.stdin)["response"]
assert r.get("patchType") == "JSONPatch" and r.get("patch"), "draguard did not convert the legacy Pod"
out = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
       "response": {"uid": "@UID@", "allowed": True, "patchType": "JSONPatch", "patch": r["patch"]}}
print(json.dumps(out, separators=(",", ":")))')
mutate_answer=$(nginx_quote "$mutate_answer")
mutate_answer=${mutate_answer/@UID@/\$review_uid}
allow_answer='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"$review_uid","allowed":$review_allowed$review_status}}'
ng_port=$(free_port)
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx/nginx.conf" <<CONF
load_module $echo_module;
user root;
worker_processes 2;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  map \$request_body \$review_uid { "~\"uid\"\\s*:\\s*\"(?<u>[^\"]{1,128})\"" \$u; default ""; }
  map \$request_body \$review_allowed { "~\"name\"\\s*:\\s*\"legacy-pod\"" false; default true; }
  map \$review_allowed \$review_status { false ',"status":{"code":403,"message":"bench probe refused"}'; default ""; }
  server {
    listen 127.0.0.1:$ng_port ssl http2;
    ssl_certificate $tmp/dg-state/tls.crt;
    ssl_certificate_key $tmp/dg-state/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 100000;
    keepalive_timeout 90s;
    client_max_body_size 8m;
    client_body_buffer_size 8m;
    client_body_in_single_buffer on;
    location = /review-legacy-8k { default_type application/json; return 200 '$escaped'; }
    location = /validate { default_type application/json; echo_read_request_body; echo -n '$allow_answer'; }
    location = /mutate { default_type application/json; echo_read_request_body; echo -n '$mutate_answer'; }
  }
}
CONF
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
ng_pid=$!; pids+=("$ng_pid")
ng_url=https://127.0.0.1:$ng_port/review-legacy-8k
ng_hook=https://127.0.0.1:$ng_port/validate
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
# What kube-apiserver calls: nginx's webhook endpoint answers for any review.
declare -A hook_of=([nginx]=$ng_hook [draguard]=$dg_url [kyverno]=$ky_url [gatekeeper]=$gk_url)
declare -A ca_of=([nginx]=$dg_ca [draguard]=$dg_ca [kyverno]=$ky_ca [gatekeeper]=$gk_ca)
for name in nginx draguard $peers; do
  url=${url_of[$name]}
  wait_until 120 "$name denying the legacy Pod's review" denies_legacy "$url" ||
    { tail -30 "$tmp/$name.log" >&2 2>/dev/null; exit 1; }
  [ "$(allowed "${hook_of[$name]}" "$tmp/review-dra.json")" = true ] || { echo "peers.sh: $name does not admit the DRA Pod's review" >&2; exit 1; }
done
echo "check: draguard, $peers deny the legacy GPU Pod's review and admit the DRA Pod's; nginx answers both"

# register SERVER: the benchmark's ValidatingWebhookConfiguration points at SERVER (none: deleted).
register() {
  "${k[@]}" delete validatingwebhookconfiguration bench-peer --ignore-not-found > /dev/null
  [ "$1" = none ] && return 0
  "${k[@]}" apply -f - > /dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: bench-peer
  labels: {bench.draguard.io/server: $1}
webhooks:
- name: validate.bench.draguard.io
  clientConfig: {url: "${hook_of[$1]}", caBundle: "${ca_of[$1]}"}
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
# registered SERVER: the apiserver calls SERVER (the legacy Pod is refused by it: 403 from draguard,
# Gatekeeper and nginx, 400 from Kyverno), or none.
registered() {
  local code; code=$(create_code "$tmp/pod-legacy.json")
  if [ "$1" = none ]; then [ "$code" = 201 ]; else [ "${code:0:1}" = 4 ] && grep -q 'webhook \\"validate.bench.draguard.io\\" denied' "$tmp/create.out"; fi
}
switch_to() {
  register "$1"
  wait_until 30 "the apiserver calling $1" registered "$1" || { cat "$tmp/create.out" >&2; exit 1; }
}
wait_until 60 "ServiceAccount bench/default" "${k[@]}" -n bench get serviceaccount default
for s in draguard nginx $peers none; do
  switch_to "$s"
  code=$(create_code "$tmp/pod-dra.json")
  [ "$code" = 201 ] || { echo "peers.sh: through the apiserver, $s refused the DRA Pod ($code)" >&2; cat "$tmp/create.out" >&2; exit 1; }
done
# nginx's /mutate as a mutating webhook: the legacy Pod comes back converted (its GPU as a claim).
"${k[@]}" apply -f - > /dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: bench-nginx-mutate}
webhooks:
- name: mutate.bench.draguard.io
  clientConfig: {url: "https://127.0.0.1:$ng_port/mutate", caBundle: "$dg_ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: bench}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
YAML
converted() {
  [ "$(create_code "$tmp/pod-legacy.json")" = 201 ] &&
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); sys.exit(0 if p["spec"].get("resourceClaims") else 1)' "$tmp/create.out"
}
wait_until 30 "nginx's /mutate converting the legacy Pod" converted || { cat "$tmp/create.out" >&2; exit 1; }
"${k[@]}" delete mutatingwebhookconfiguration bench-nginx-mutate > /dev/null
echo "check: through kube-apiserver, each webhook refuses the legacy GPU Pod and admits the DRA Pod; nginx's /mutate converts the legacy Pod"

# --- the measurements --------------------------------------------------------------------------------
hz=$(getconf CLK_TCK)
calc() { awk "BEGIN { printf \"$1\", ($2) }"; }  # calc FORMAT EXPRESSION
cpu_ticks() {  # user + system clock ticks of a process and its children processes (nginx's workers)
  local total=0 p
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    [ -r "/proc/$p/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}
# wrk_run URL BODY CONNECTIONS: sets rps, p50, p99 (ms), requests, non2xx and errors.
wrk_run() {
  cat > "$tmp/post.lua" <<LUA
local f = io.open("$2", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
LUA
  wrk -t2 -c"$3" -d"$duration" --timeout 10s -s "$tmp/post.lua" "$1" > "$tmp/run.wrk" 2>&1
  read -r requests dur_us p50 p99 non2xx errors <<< "$(awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7}' "$tmp/run.wrk")"
  rps=$(calc '%.0f' "$requests * 1e6 / $dur_us") p50=$(calc '%.3f' "$p50 / 1e3") p99=$(calc '%.3f' "$p99 / 1e3")
  late=0
}
# load_run MODE N SECONDS: Pod CREATEs through kube-apiserver (MODE clients: N closed-loop clients;
# rate: N per second); sets rps (2xx answers per second), p50, p99 (ms, 2xx answers), non2xx,
# errors and late.
load_run() {
  local flag=-clients; [ "$1" = rate ] && flag=-rate
  "$load_bin" -url "https://127.0.0.1:$api_port/api/v1/namespaces/bench/pods?dryRun=All" -body "$tmp/pod-dra.json" \
    -token "$token" "$flag" "$2" -duration "$3" > "$tmp/run.load" 2> "$tmp/run.load.err" ||
    { cat "$tmp/run.load.err" >&2; exit 1; }
  local due sent ok secs p50us p95us p99us
  read -r due sent ok non2xx errors late secs p50us p95us p99us <<< "$(awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7, $8, $9, $10, $11}' "$tmp/run.load")"
  rps=$(calc '%.0f' "$ok / $secs") p50=$(calc '%.3f' "$p50us / 1e3") p99=$(calc '%.3f' "$p99us / 1e3")
}
# conn_set PORT: the connections to PORT (client side, established or in TIME-WAIT on either side),
# one line each; every connection leaves one TIME-WAIT entry for 60 s after it closes, so those in
# a run's set and not in the set before it were opened during the run (or just before it).
conn_set() {
  { ss -Htn state established "( dport = :$1 )"; ss -Htn state time-wait "( dport = :$1 or sport = :$1 )"; } |
    awk '{print $(NF-1), $NF}' | sort -u
}
# proto_to PORT: the protocol kube-apiserver speaks to the server on PORT: HTTP/1.1 with
# APISERVER_HTTP1=1, else what the server chooses by ALPN from h2 and http/1.1 (curl offers both,
# as kube-apiserver's client does to a loopback URL).
proto_to() {
  [ "${APISERVER_HTTP1:-0}" = 1 ] && { echo http/1.1; return; }
  case "$(curl -sk -o /dev/null -w '%{http_version}' --http2 "https://127.0.0.1:$1/" 2>/dev/null)" in
    2) echo h2 ;; *) echo http/1.1 ;;
  esac
}
declare -A R  # R[server,test,metric] = space-separated values, one per round
add() { R[$1,$2,$3]="${R[$1,$2,$3]:-} $4"; }
rotate() { local n=$1; shift; local a=("$@"); echo "${a[@]:n%${#a[@]}}" "${a[@]:0:n%${#a[@]}}"; }
port_of() { local u=${hook_of[$1]#https://127.0.0.1:}; echo "${u%%/*}"; }

if want webhook; then
  echo "webhook: $(wc -c < "$legacy_review") bytes (legacy GPU Pod review), wrk -t2 -c$conns -d$duration, $rounds rounds"
  for round in $(seq 1 "$rounds"); do
    for s in $(rotate $((round - 1)) nginx draguard $peers); do
      pid=${pid_of[$s]}
      c0=$(cpu_ticks "$pid")
      wrk_run "${url_of[$s]}" "$legacy_review" "$conns"
      c1=$(cpu_ticks "$pid")
      cpu=$(calc '%.1f' "($c1 - $c0) * 1e6 / $hz / ($requests > 0 ? $requests : 1)")
      printf '  round %d %-10s requests/s %8s  p50 %8sms  p99 %8sms  CPU/request %7sus  non-2xx %s  errors %s\n' \
        "$round" "$s" "$rps" "$p50" "$p99" "$cpu" "$non2xx" "$errors"
      for m in rps p50 p99 cpu non2xx errors late; do add "$s" webhook "$m" "${!m}"; done
    done
  done
  for s in nginx draguard $peers; do
    rss=$(awk '/VmHWM/ {print $2}' "/proc/${pid_of[$s]}/status")
    [ "$s" = nginx ] && for p in $(pgrep -P "$ng_pid"); do rss=$((rss + $(awk '/VmHWM/ {print $2}' "/proc/$p/status"))); done
    R[$s,webhook,rss]=$rss
  done
fi

api_tests=""
for t in create-50 create-500 open-100 open-400; do want "$t" && api_tests+=" $t"; done
for t in $api_tests; do
  n=${t#*-}
  if [ "${t%%-*}" = create ]; then mode=clients secs=$duration what="$n closed-loop clients for $duration"
  else mode=rate secs=$open_duration what="$n/s open loop for $open_duration"; fi
  echo "$t: Pod CREATE (dry run, DRA Pod) through kube-apiserver, $what, $rounds rounds"
  for round in $(seq 1 "$rounds"); do
    for s in $(rotate $((round - 1)) none nginx draguard $peers); do
      switch_to "$s"
      prof=""
      if [ -n "${PROFILE_DIR:-}" ] && [ "$round" = 1 ]; then  # kube-apiserver's CPU profile of the run
        mkdir -p "$PROFILE_DIR"
        "${k[@]}" get --raw "/debug/pprof/profile?seconds=4" > "$PROFILE_DIR/kube-apiserver-$s-$t.pprof" &
        prof=$!
      fi
      conns_note="" port="" before=""
      if [ "$s" != none ]; then port=$(port_of "$s"); before=$(conn_set "$port"); fi
      a0=$(cpu_ticks "$api_pid") w0=0; [ "$s" = none ] || w0=$(cpu_ticks "${pid_of[$s]}")
      load_run "$mode" "$n" "$secs"
      a1=$(cpu_ticks "$api_pid") w1=0; [ "$s" = none ] || w1=$(cpu_ticks "${pid_of[$s]}")
      [ -z "$prof" ] || wait "$prof" || true
      total=$(calc '%.0f' "$rps * ${secs%s} > 1 ? $rps * ${secs%s} : 1")
      api_cpu=$(calc '%.0f' "($a1 - $a0) * 1e6 / $hz / $total")
      hook_cpu=$(calc '%.0f' "($w1 - $w0) * 1e6 / $hz / $total")
      conns_s=0
      if [ -n "$port" ]; then
        opened=$(comm -13 <(printf '%s\n' "$before") <(conn_set "$port") | grep -c . || true)
        conns_s=$(calc '%.1f' "$opened / ${secs%s}")
        conns_note="  conns/s $conns_s ($(proto_to "$port"))"
      fi
      printf '  round %d %-10s requests/s %6s  p50 %8sms  p99 %8sms  non-2xx %s  errors %s  late %s  CPU/create apiserver %sus webhook %sus%s\n' \
        "$round" "$s" "$rps" "$p50" "$p99" "$non2xx" "$errors" "$late" "$api_cpu" "$hook_cpu" "$conns_note"
      for m in rps p50 p99 non2xx errors late api_cpu hook_cpu conns_s; do add "$s" "$t" "$m" "${!m}"; done
    done
  done
done
register none

# --- the summary ------------------------------------------------------------------------------------
# One python3 run over every value (python3 starts slowly on a loaded machine): medians over the
# rounds, sums of the failures, ratios, what each server adds over none, and --check.
for key in "${!R[@]}"; do echo "$key ${R[$key]}"; done > "$tmp/results"
echo
api_version=$("${k[@]}" get --raw /version 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])' 2>/dev/null || echo unknown)
[ "${APISERVER_HTTP1:-0}" = 1 ] && api_version+=" (DISABLE_HTTP2=1)"
versions="$("$bin" version 2>/dev/null || echo draguard), Kyverno $kyverno_version, Gatekeeper $gatekeeper_version ($engine), $(nginx -v 2>&1 | sed 's/.*: //'), kube-apiserver $api_version"
host="$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/results" "$check" "$peers" "$(want webhook && echo webhook)" "$api_tests" "$versions" "$host" <<'PY'
import statistics, sys
path, check, peers, webhook, api_tests, versions, host = sys.argv[1:8]
peers, api_tests = peers.split(), api_tests.split()
R = {}
for line in open(path):
    key, *vals = line.split()
    R[tuple(key.split(","))] = [float(v) for v in vals]
def med(s, t, m): return statistics.median(R[(s, t, m)])
def total(s, t, m): return int(sum(R.get((s, t, m), [0])))
tests = ([webhook] if webhook else []) + api_tests
servers = lambda t: ["nginx", "draguard"] + peers if t == "webhook" else ["none", "nginx", "draguard"] + peers
for t in tests:
    for s in servers(t):
        print(f"{s} {t} requests/s {med(s, t, 'rps'):.0f} p50 {med(s, t, 'p50'):.3f}ms p99 {med(s, t, 'p99'):.3f}ms")
for t in tests:
    for s in servers(t):
        print(f"failures {s} {t} non-2xx {total(s, t, 'non2xx')} errors {total(s, t, 'errors')} late {total(s, t, 'late')}")
for t in tests:
    for p in (["nginx"] if t == "webhook" else ["none", "nginx"]) + peers:
        print(f"ratio {p} {t} throughput {med('draguard', t, 'rps') / med(p, t, 'rps'):.2f} "
              f"p99 {med('draguard', t, 'p99') / med(p, t, 'p99'):.2f}")
added = lambda s, t, m: med(s, t, m) - med("none", t, m)
for t in api_tests:
    for s in ["nginx", "draguard"] + peers:
        print(f"added {s} {t} p50 {added(s, t, 'p50'):.3f}ms p99 {added(s, t, 'p99'):.3f}ms")
for t in api_tests:
    for s in servers(t):
        print(f"cost {s} {t} CPU/create apiserver {med(s, t, 'api_cpu'):.0f}us webhook {med(s, t, 'hook_cpu'):.0f}us "
              f"conns/s {med(s, t, 'conns_s'):.1f}")
if webhook:
    for s in servers("webhook"):
        print(f"{s} webhook CPU/request {med(s, 'webhook', 'cpu'):.1f}us peak RSS {int(R[(s, 'webhook', 'rss')][0])} kB")
print(f"versions: {versions}; host: {host}")
if check == "1":
    failed = []
    if webhook:
        for p in peers:
            if not (med("draguard", "webhook", "rps") >= 10 * med(p, "webhook", "rps")
                    and med("draguard", "webhook", "p99") < med(p, "webhook", "p99")):
                failed.append(f"webhook: draguard's throughput is not 10x {p}'s with a lower p99")
    for t in api_tests:
        for p in peers:
            if med("draguard", t, "rps") < med(p, t, "rps"):
                failed.append(f"{t}: draguard's throughput is below {p}'s")
        if med("draguard", t, "rps") < 0.95 * med("nginx", t, "rps"):
            failed.append(f"{t}: draguard's throughput is below 0.95x nginx's")
        if t.startswith("open-") and added("draguard", t, "p99") > added("nginx", t, "p99") + 1:
            failed.append(f"{t}: draguard adds more than nginx's added p99 + 1 ms")
    for f in failed:
        print("check: FAILED: " + f)
    if failed:
        sys.exit(1)
    print("check: passed (every API server test: draguard's throughput >= each peer's and >= 0.95x nginx's; "
          "open loop: added p99 <= nginx's + 1 ms; webhook: >= 10x each peer's with a lower p99)")
PY
