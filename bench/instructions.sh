#!/usr/bin/env bash
# Instructions per review and per request (callgrind): the measure that tells a change from the
# drift of a shared host, where wall times move by 2x from minute to minute.
#   In process: Reviewer::Review of webhook_bench's 1 KiB plain Pod, 8 KiB and 64 KiB legacy GPU
#   Pods (BM_Review), only the review counted; also its allocations (operator new) per review.
#   --server: the whole of `draguard serve` per request (every thread; the kernel's part is not
#   counted), under `wrk -t1 -c4 -d${DURATION:-10s}` POSTing bench/data's 1 KiB and 8 KiB reviews,
#   counted only while wrk runs (callgrind_control), after a 2 s warm-up.
# valgrind runs simdjson's haswell kernel (it has no AVX-512), so simdjson weighs more here than in
# time on hosts where simdjson picks icelake. Both run with the image's GLIBC_TUNABLES unless set.
# Usage: bench/instructions.sh [--server] [build-dir]   (default build/; needs valgrind, python3,
#   and for --server wrk and curl: apt-get install valgrind wrk)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=0
if [ "${1:-}" = "--server" ]; then server=1; shift; fi
build=${1:-$root/build}
for tool in valgrind callgrind_control python3; do
  command -v "$tool" >/dev/null || { echo "instructions.sh: $tool not found (apt-get install valgrind python3)" >&2; exit 1; }
done
# shellcheck source=../deploy/image/image.env
. "$root/deploy/image/image.env"
export GLIBC_TUNABLES=${GLIBC_TUNABLES-$IMAGE_GLIBC_TUNABLES}
tmp=$(mktemp -d /tmp/draguard-instructions.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# calls OUT REGEX: how many calls the callgrind output OUT records to functions matching REGEX.
calls() {
  python3 - "$1" "$2" <<'PY'
import re, sys
names, total, callee = {}, 0, None
pattern = re.compile(sys.argv[2])
with open(sys.argv[1]) as f:
    for line in f:
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            callee = names.get(m.group(2), "") if m.group(1) == "cfn" else None
            continue
        m = re.match(r"^calls=(\d+)", line)
        if m and callee is not None and pattern.search(callee):
            total += int(m.group(1))
print(total)
PY
}
total() { awk '/^totals:/ {print $2; exit}' "$1"; }
per() { python3 -c "import sys; print(f'{round(int(sys.argv[1]) / max(1, int(sys.argv[2]))):,}')" "$1" "$2"; }

if [ "$server" = 0 ]; then
  bench=$build/bench/webhook_bench
  [ -x "$bench" ] || { echo "instructions.sh: $bench not built (scripts/build.sh)" >&2; exit 1; }
  for name in plain_pod_1k legacy_gpu_pod_8k legacy_gpu_pod_64k; do
    out=$tmp/$name.callgrind
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='draguard::webhook::Reviewer::Review*' \
      "$bench" --benchmark_filter="^BM_Review/$name\$" --benchmark_min_time=0.5 > /dev/null 2> "$tmp/valgrind.log" ||
      { cat "$tmp/valgrind.log" >&2; exit 1; }
    reviews=$(calls "$out" '^draguard::webhook::Reviewer::Review\(')
    allocs=$(calls "$out" '^operator new\(unsigned long')
    printf '%-20s reviews %6s   instructions/review %9s   allocations/review %5s\n' "$name" "$reviews" \
      "$(per "$(total "$out")" "$reviews")" "$(per "$allocs" "$reviews")"
  done
  exit 0
fi

bin=$build/src/cli/draguard
[ -x "$bin" ] || { echo "instructions.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "instructions.sh: $tool not found (apt-get install $tool)" >&2; exit 1; }
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$tmp/serve.callgrind
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
  "$bin" serve --listen "127.0.0.1:$port" --state-dir "$tmp/state" --shutdown-delay 0 > "$tmp/serve.log" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 1 600); do  # valgrind starts the server some 20x slower
  curl -s --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf --cacert "$tmp/state/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
for file in review-plain-1k.json review-legacy-gpu-8k.json; do
  cat > "$tmp/post.lua" <<LUA
local f = io.open("$root/bench/data/$file", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA
  wrk -t1 -c4 -d2s -s "$tmp/post.lua" "https://127.0.0.1:$port/validate" > /dev/null
  callgrind_control --zero "$pid" > /dev/null 2>&1
  callgrind_control --instr=on "$pid" > /dev/null 2>&1
  wrk -t1 -c4 -d"${DURATION:-10s}" -s "$tmp/post.lua" "https://127.0.0.1:$port/validate" > "$tmp/wrk.txt"
  callgrind_control --instr=off "$pid" > /dev/null 2>&1
  rm -f "$out".*
  callgrind_control --dump="$file" "$pid" > /dev/null 2>&1
  requests=$(awk '/requests in/ {print $1}' "$tmp/wrk.txt")
  dumped=$(cat "$out".* 2>/dev/null | awk '/^totals:/ {s += $2} END {print s + 0}')
  printf '%-26s requests %6s   instructions/request %9s\n' "$file" "$requests" "$(per "$dumped" "$requests")"
done
