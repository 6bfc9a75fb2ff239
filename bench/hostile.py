#!/usr/bin/env python3
"""Hostile-load probe against `draguard serve` on loopback (manual benchmark, not a test).

Opens, all at once: IDLE keep-alive TLS connections (one request each, then silent), SLOWLORIS
connections sending a header byte every second and never finishing, and SLOWBODY connections
announcing a 64 KiB body and sending a byte a second. Meanwhile a separate process sends valid /validate
reviews on fresh TLS connections. Reports probes lost (no 200 within --probe-timeout), probe
p50/p99, the server's peak and final RSS, and the time from SIGTERM to exit while the hostile
connections are still open. Bounded: every connection closes and the script ends by itself.

Usage: bench/hostile.py [--bin build/src/cli/draguard] [--idle 1000] [--slowloris 200]
                        [--slowbody 200] [--probes 200] [--rate 20] [--shutdown-delay 1]
"""
import argparse
import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def request(body, path="/validate", close=False):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return status


async def open_tls(port, ctx):
    return await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")


async def idle(port, ctx, body, hold, stats):
    try:
        r, w = await asyncio.wait_for(open_tls(port, ctx), 30)
        w.write(request(body))
        await asyncio.wait_for(read_response(r), 30)
        stats["idle_ok"] += 1
        await asyncio.sleep(hold)  # keep the connection open and silent
        w.close()
    except Exception:
        stats["idle_err"] += 1


async def slowloris(port, ctx, hold, stats):
    try:
        r, w = await asyncio.wait_for(open_tls(port, ctx), 30)
        stats["loris_open"] += 1
        w.write(b"POST /validate HTTP/1.1\r\nHost: x\r\n")
        end = time.monotonic() + hold
        while time.monotonic() < end:
            await asyncio.sleep(1)
            w.write(b"X-a: b\r\n")
            await w.drain()
        w.close()
    except Exception:
        stats["loris_cut"] += 1


async def slowbody(port, ctx, hold, stats):
    try:
        r, w = await asyncio.wait_for(open_tls(port, ctx), 30)
        stats["slowbody_open"] += 1
        w.write(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 65536\r\n\r\n{")
        end = time.monotonic() + hold
        while time.monotonic() < end:
            await asyncio.sleep(1)
            w.write(b" ")
            await w.drain()
        w.close()
    except Exception:
        stats["slowbody_cut"] += 1


def probe_process(port, cafile, body, count, rate, timeout):
    """Runs in its own process, so the hostile connections' client work does not delay it."""
    import json
    ctx = ssl.create_default_context(cafile=cafile)
    lat, lost, non200 = [], 0, 0
    for _ in range(count):
        t0 = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    s.sendall(request(body, close=True))
                    data = b""
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        data += chunk
            if data.startswith(b"HTTP/1.1 200"):
                lat.append(time.monotonic() - t0)
            else:
                non200 += 1
        except Exception:
            lost += 1
        time.sleep(max(0, 1 / rate - (time.monotonic() - t0)))
    print(json.dumps({"lat": lat, "lost": lost, "non200": non200}))


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


async def main(args):
    body = open(os.path.join(ROOT, "bench/data/review-legacy-gpu-8k.json"), "rb").read()
    tmp = tempfile.mkdtemp(prefix="draguard-hostile.")
    port = free_port()
    log = open(os.path.join(tmp, "draguard.log"), "w")
    proc = subprocess.Popen([args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--state-dir",
                             os.path.join(tmp, "state"), "--shutdown-delay",
                             str(args.shutdown_delay)] + args.extra, stdout=log, stderr=log)
    try:
        ctx = None
        for _ in range(400):
            try:
                ctx = ssl.create_default_context(cafile=os.path.join(tmp, "state/ca.crt"))
                r, w = await open_tls(port, ctx)
                w.close()
                break
            except Exception:
                await asyncio.sleep(0.05)
        stats = {k: 0 for k in ("idle_ok", "idle_err", "loris_open", "loris_cut", "slowbody_open",
                                "slowbody_cut", "probe_lost", "probe_non200")}
        hold = args.probes / args.rate + 5
        hostile = [asyncio.create_task(idle(port, ctx, body, hold, stats)) for _ in range(args.idle)]
        hostile += [asyncio.create_task(slowloris(port, ctx, hold, stats)) for _ in range(args.slowloris)]
        hostile += [asyncio.create_task(slowbody(port, ctx, hold, stats)) for _ in range(args.slowbody)]
        await asyncio.sleep(3)  # let the hostile connections settle
        import json
        probe = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--probe-only", str(port), os.path.join(tmp, "state/ca.crt"),
            str(args.probes), str(args.rate), str(args.probe_timeout), stdout=asyncio.subprocess.PIPE)
        out, _ = await probe.communicate()
        res = json.loads(out)
        lat = res["lat"]
        stats["probe_lost"] = res["lost"]
        stats["probe_non200"] = res["non200"]
        peak = rss_kib(proc.pid, "VmHWM")
        now_rss = rss_kib(proc.pid, "VmRSS")
        # SIGTERM while the hostile connections are still open: time to exit.
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.get_running_loop().run_in_executor(None, proc.wait, 60)
            exit_s = "%.2f s" % (time.monotonic() - t0)
        except subprocess.TimeoutExpired:
            exit_s = "> 60 s (killed)"
        for t in hostile:
            t.cancel()
        await asyncio.gather(*hostile, return_exceptions=True)
        after = rss_kib(proc.pid, "VmRSS") if proc.poll() is None else 0
        print(f"hostile: idle {args.idle} (opened {stats['idle_ok']}, failed {stats['idle_err']}), "
              f"slowloris {args.slowloris} (cut by server {stats['loris_cut']}), "
              f"slow bodies {args.slowbody} (cut by server {stats['slowbody_cut']})")
        print(f"probes {args.probes}: lost {stats['probe_lost']}, non-200 {stats['probe_non200']}, "
              f"p50 {pct(lat, 0.5) * 1000:.1f} ms, p99 {pct(lat, 0.99) * 1000:.1f} ms")
        print(f"server RSS peak {peak / 1024:.1f} MiB, after the probes {now_rss / 1024:.1f} MiB; "
              f"SIGTERM to exit {exit_s} (shutdown delay {args.shutdown_delay} s)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--probe-only":
        port, cafile, count, rate, timeout = sys.argv[2:7]
        body = open(os.path.join(ROOT, "bench/data/review-legacy-gpu-8k.json"), "rb").read()
        probe_process(int(port), cafile, body, int(count), float(rate), float(timeout))
        sys.exit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/src/cli/draguard"))
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--slowloris", type=int, default=200)
    ap.add_argument("--slowbody", type=int, default=200)
    ap.add_argument("--probes", type=int, default=200)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--probe-timeout", type=float, default=5)
    ap.add_argument("--shutdown-delay", type=int, default=1)
    ap.add_argument("extra", nargs="*", help="extra draguard serve flags (after --)")
    asyncio.run(main(ap.parse_args()))
