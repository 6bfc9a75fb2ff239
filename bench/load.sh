#!/usr/bin/env bash
# Load test: draguard vs nginx serving the same fixed AdmissionReview responses over the same TLS
# certificate, both on loopback. wrk: 2 threads, 32 keep-alive connections; three reviews: a 1 KiB
# plain Pod, the 8 KiB legacy-GPU Pod and a 64 KiB legacy-GPU Pod. Each review runs ROUNDS rounds
# (default 5) of one nginx and one draguard run of DURATION (default 5 s), the order alternating
# from round to round, so that a host whose speed drifts affects both servers alike. Prints
# requests/s, p50/p99 and CPU time per request of every run, each round's throughput ratio
# draguard/nginx and p99 ratio draguard/nginx, their medians per review, and draguard's peak RSS.
# Usage: bench/load.sh [--check] [--floors] [path/to/draguard]   (default build/src/cli/draguard)
#   draguard runs with the image's GLIBC_TUNABLES (deploy/image/image.env) unless GLIBC_TUNABLES is set.
#   --check: exit 1 unless, on every review, the median throughput ratio is at least 0.9 and the
#   median p99 ratio at most 1, and the in-process 8 KiB review (BM_Review/legacy_gpu_pod_8k of the
#   webhook_bench of the binary's build tree, or BENCH; median of three, with the same
#   GLIBC_TUNABLES) takes at most 4 us: the targets in docs/performance.md.
#   --floors: each round also runs draguard's two floors, answers that leave out the review, each
#   against the same round's nginx run: "transport" POSTs the review as text/plain (the whole body
#   is read over TLS and answered 415 unparsed, as nginx discards it), "unreviewed" POSTs it with
#   request.kind Pod spelt Pox (same length: the whole body is validated and the envelope decoded,
#   no rule applies, the answer is an allow with the decision's log line). Between "unreviewed" and
#   draguard's own ratio lies the rules' work; the floors are reported, never checked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0 floors=0
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1; shift ;;
    --floors) floors=1; shift ;;
    *) break ;;
  esac
done
bin=${1:-$root/build/src/cli/draguard}
duration=${DURATION:-5s}
rounds=${ROUNDS:-5}
threads=${THREADS:-2}
conns=${CONNECTIONS:-32}
# name:file:description, in the order run.
cases=(
  "plain-1k:review-plain-1k.json:plain Pod"
  "legacy-8k:review-legacy-gpu-8k.json:legacy GPU Pod"
  "legacy-64k:review-legacy-gpu-64k.json:legacy GPU Pod"
)
for tool in wrk nginx python3; do
  command -v "$tool" >/dev/null || { echo "load.sh: $tool not found (run scripts/install-test-deps.sh)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "load.sh: $bin not built (run scripts/build.sh)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/draguard-load.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# draguard on its generated certificate (the state folder lives in $tmp), with the allocator
# setting its container image runs with (deploy/image/image.env).
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"
dg_port=$(free_port)
GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES} "$bin" serve --listen "127.0.0.1:$dg_port" --state-dir "$tmp/state" --shutdown-delay 0 ${DRAGUARD_ARGS:-} > "$tmp/draguard.log" 2>&1 &
dg_pid=$!
pids+=("$dg_pid")
for _ in $(seq 1 200); do
  curl -s --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$dg_port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -sf --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$dg_port/readyz" >/dev/null || { cat "$tmp/draguard.log"; exit 1; }

# The reference: nginx answering, for each review, the response draguard gives, with the same
# certificate (one location per review).
locations=""
for c in "${cases[@]}"; do
  IFS=: read -r name file _ <<< "$c"
  response=$(curl -s --cacert "$tmp/state/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$root/bench/data/$file" "https://127.0.0.1:$dg_port/validate")
  escaped=$(printf '%s' "$response" | sed "s/'/\\\\'/g")
  locations+="    location = /$name { default_type application/json; return 200 '$escaped'; }"$'\n'
done
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
    ssl_certificate $tmp/state/tls.crt;
    ssl_certificate_key $tmp/state/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 100000;
    client_max_body_size 8m;
    client_body_buffer_size 64k;
$locations  }
}
CONF
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
ng_pid=$!
pids+=("$ng_pid")
for _ in $(seq 1 200); do curl -sk "https://127.0.0.1:$ng_port/" -o /dev/null && break; sleep 0.05; done

to_us() {  # wrk latency ("850.00us", "2.96ms", "1.20s") in microseconds
  python3 -c 'import sys,re
m=re.match(r"([0-9.]+)(us|ms|s)$", sys.argv[1]); print("%.1f" % (float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]))' "$1"
}
cpu_ticks() {  # user + system clock ticks of the given processes and their children processes
  local total=0 p
  for p in "$@" $(pgrep -P "$(IFS=,; echo "$*")" 2>/dev/null || true); do
    [ -r "/proc/$p/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)
run() {  # label url body-file server-pid [content-type]; sets rps and p99_us
  cat > "$tmp/post.lua" <<LUA
local f = io.open("$3", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "${5:-application/json}"
LUA
  local p50 p99 non2xx t0 t1 cpu_us
  t0=$(cpu_ticks "$4")
  wrk -t"$threads" -c"$conns" -d"$duration" --latency -s "$tmp/post.lua" "$2" > "$tmp/run.wrk" 2>&1
  t1=$(cpu_ticks "$4")
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/run.wrk")
  p50=$(awk '$1=="50%" {print $2}' "$tmp/run.wrk")
  p99=$(awk '$1=="99%" {print $2}' "$tmp/run.wrk")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$tmp/run.wrk")
  requests=$(awk '/requests in/ {print $1}' "$tmp/run.wrk")
  cpu_us=$(python3 -c "print('%.1f' % (($t1 - $t0) * 1e6 / $hz / max(1, $requests)))")
  printf '  %-10s requests/s %10s   p50 %9s   p99 %9s   CPU/request %6sus   non-2xx %s\n' "$1" "$rps" "$p50" "$p99" \
    "$cpu_us" "${non2xx:-0}"
  p99_us=$(to_us "$p99")
}
median() { python3 -c 'import statistics,sys; print("%.2f" % statistics.median(map(float, sys.argv[1:])))' "$@"; }
echo "wrk -t$threads -c$conns -d$duration per run, $rounds rounds per review; draguard with GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES}"
failed=0 misses=()
for c in "${cases[@]}"; do
  IFS=: read -r name file what <<< "$c"
  body="$root/bench/data/$file"
  echo "$name: $(wc -c < "$body") bytes ($what review)"
  tput_ratios=() p99_ratios=() transport_ratios=() unreviewed_ratios=()
  if [ "$floors" = 1 ]; then
    python3 - "$body" "$tmp/$name-unreviewed.json" <<'PY'
import sys
pod = b'"kind":{"group":"","version":"v1","kind":"Pod"}'
text = open(sys.argv[1], "rb").read()
assert text.count(pod) == 1, "request.kind is not the one Pod kind"
open(sys.argv[2], "wb").write(text.replace(pod, pod.replace(b'"Pod"', b'"Pox"')))
PY
  fi
  for round in $(seq 1 "$rounds"); do
    order="nginx draguard"
    [ $((round % 2)) = 0 ] && order="draguard nginx"
    for server in $order; do
      if [ "$server" = nginx ]; then
        run nginx "https://127.0.0.1:$ng_port/$name" "$body" "$ng_pid"
        ng_rps=$rps ng_p99=$p99_us
      else
        run draguard "https://127.0.0.1:$dg_port/validate" "$body" "$dg_pid"
        dg_rps=$rps dg_p99=$p99_us
      fi
    done
    ratios=$(python3 -c "print('%.2f %.2f' % ($dg_rps / $ng_rps, $dg_p99 / $ng_p99))")
    read -r tput_ratio p99_ratio <<< "$ratios"
    tput_ratios+=("$tput_ratio") p99_ratios+=("$p99_ratio")
    echo "  round $round   draguard/nginx throughput $tput_ratio   p99 $p99_ratio"
    if [ "$floors" = 1 ]; then
      run transport "https://127.0.0.1:$dg_port/validate" "$body" "$dg_pid" text/plain
      transport_ratios+=("$(python3 -c "print('%.2f' % ($rps / $ng_rps))")")
      run unreviewed "https://127.0.0.1:$dg_port/validate" "$tmp/$name-unreviewed.json" "$dg_pid"
      unreviewed_ratios+=("$(python3 -c "print('%.2f' % ($rps / $ng_rps))")")
      echo "  round $round   floors/nginx throughput: transport ${transport_ratios[-1]}   unreviewed ${unreviewed_ratios[-1]}"
    fi
  done
  tput_ratio=$(median "${tput_ratios[@]}") p99_ratio=$(median "${p99_ratios[@]}")
  echo "  ratio     draguard/nginx throughput $tput_ratio   p99 $p99_ratio   (medians of $rounds rounds)"
  if [ "$floors" = 1 ]; then
    echo "  floors    throughput/nginx: transport $(median "${transport_ratios[@]}")   unreviewed $(median "${unreviewed_ratios[@]}")   (medians of $rounds rounds)"
  fi
  if python3 -c "import sys; sys.exit(0 if $tput_ratio < 0.9 or $p99_ratio > 1 else 1)"; then
    failed=1
    misses+=("$name: throughput ratio $tput_ratio (>= 0.9), p99 ratio $p99_ratio (<= 1)")
  fi
done
rss=$(awk '/VmHWM/ {print $2, $3}' "/proc/$dg_pid/status")
echo "draguard  peak RSS $rss"
if [ "$check" = 1 ]; then
  bench=${BENCH:-$(cd "$(dirname "$bin")/../.." && pwd)/bench/webhook_bench}
  if [ -x "$bench" ]; then
    review_us=$(GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES} "$bench" --benchmark_filter='^BM_Review/legacy_gpu_pod_8k$' --benchmark_min_time=0.5 \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=csv 2>/dev/null |
      awk -F, '$1 ~ /_median"?$/ {d = $5 == "us" ? 1 : ($5 == "ms" ? 0.001 : 1000); printf "%.2f", $3 / d}') ||
      review_us=""
    echo "in-process 8 KiB review (BM_Review/legacy_gpu_pod_8k, median of 3): ${review_us:-?} us"
    if [ -z "$review_us" ] || python3 -c "import sys; sys.exit(0 if $review_us > 4 else 1)"; then
      failed=1
      misses+=("in-process 8 KiB review ${review_us:-not measured} us (<= 4)")
    fi
  else
    failed=1
    misses+=("in-process 8 KiB review: no $bench (scripts/build.sh -DDRAGUARD_BENCH=ON)")
  fi
  if [ "$failed" = 1 ]; then
    echo "check: FAILED"
    printf '  %s\n' "${misses[@]}"
    exit 1
  fi
  echo "check: passed (every review: median throughput ratio >= 0.9, median p99 ratio <= 1; in-process 8 KiB review <= 4 us)"
fi
