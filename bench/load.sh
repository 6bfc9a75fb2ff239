#!/usr/bin/env bash
# Load test: draguard vs nginx serving a fixed AdmissionReview response over the same TLS
# certificate, both on loopback. wrk: 2 threads, 32 keep-alive connections, 10 s, an 8 KiB
# legacy-GPU-Pod review. Prints requests/s, p50/p99 for both, the ratio, and draguard's peak RSS.
# Usage: bench/load.sh [path/to/draguard]   (default build/src/cli/draguard)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/src/cli/draguard}
duration=${DURATION:-10s}
threads=${THREADS:-2}
conns=${CONNECTIONS:-32}
body="$root/bench/data/review-legacy-gpu-8k.json"
for tool in wrk nginx python3; do
  command -v "$tool" >/dev/null || { echo "load.sh: $tool not found (run scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "load.sh: $bin not built (run scripts/build.sh)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/draguard-load.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# draguard on its generated certificate (the state folder lives in $tmp).
dg_port=$(free_port)
"$bin" serve --listen "127.0.0.1:$dg_port" --state-dir "$tmp/state" --shutdown-delay 0 ${DRAGUARD_ARGS:-} > "$tmp/draguard.log" 2>&1 &
dg_pid=$!
pids+=("$dg_pid")
for _ in $(seq 1 200); do
  curl -s --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$dg_port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -sf --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$dg_port/readyz" >/dev/null || { cat "$tmp/draguard.log"; exit 1; }

# The reference: nginx answering the response draguard gives, with the same certificate.
response=$(curl -s --cacert "$tmp/state/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$body" "https://127.0.0.1:$dg_port/validate")
ng_port=$(free_port)
mkdir -p "$tmp/nginx"
escaped=$(printf '%s' "$response" | sed "s/'/\\\\'/g")
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
    location / {
      default_type application/json;
      return 200 '$escaped';
    }
  }
}
CONF
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
pids+=("$!")
for _ in $(seq 1 200); do curl -sk "https://127.0.0.1:$ng_port/" -o /dev/null && break; sleep 0.05; done

cat > "$tmp/post.lua" <<LUA
local f = io.open("$body", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA

run() {  # name url
  wrk -t"$threads" -c"$conns" -d"$duration" --latency -s "$tmp/post.lua" "$2" > "$tmp/$1.wrk" 2>&1
  local rps p50 p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/$1.wrk")
  p50=$(awk '$1=="50%" {print $2}' "$tmp/$1.wrk")
  p99=$(awk '$1=="99%" {print $2}' "$tmp/$1.wrk")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$tmp/$1.wrk")
  printf '%-9s requests/s %10s   p50 %9s   p99 %9s   non-2xx %s\n' "$1" "$rps" "$p50" "$p99" "${non2xx:-0}"
  eval "${1}_rps=$rps"
}
echo "wrk -t$threads -c$conns -d$duration, body $(wc -c < "$body") bytes (legacy GPU Pod review)"
run nginx "https://127.0.0.1:$ng_port/validate"
run draguard "https://127.0.0.1:$dg_port/validate"
python3 -c "print('ratio     draguard/nginx throughput %.2f' % ($draguard_rps / $nginx_rps))"
rss=$(awk '/VmHWM/ {print $2, $3}' "/proc/$dg_pid/status")
echo "draguard  peak RSS $rss"
