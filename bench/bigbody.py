#!/usr/bin/env python3
"""Large-body memory probe (manual benchmark): N clients at once, 3 rounds, each POSTing a 6.8 MB
/validate review (the 8 KiB legacy-GPU review with args: [""] x 1,700,000) to a fresh
`draguard serve` on loopback. Prints the status codes and the server's RSS: at start, peak, and
2.5 s after the last answer.
Usage: bench/bigbody.py path/to/draguard [N=4] [extra serve flags...]"""
import json, os, socket, ssl, subprocess, sys, tempfile, threading, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
extra = sys.argv[3:]
review = json.load(open(os.path.join(root, "bench/data/review-legacy-gpu-8k.json")))
review["request"]["object"]["spec"]["containers"][0]["args"] = [""] * 1700000
body = json.dumps(review).encode()
tmp = tempfile.mkdtemp(prefix="draguard-bigbody.")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
p = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", tmp + "/st",
                      "--shutdown-delay", "0"] + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.05)
    time.sleep(0.5)

    def rss(field):
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
        return 0

    base = rss("VmRSS")
    ctx = ssl.create_default_context(cafile=tmp + "/st/ca.crt")
    codes = []

    def one():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost") as c:
                c.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                d = b""
                while True:
                    x = c.recv(65536)
                    if not x:
                        break
                    d += x
                codes.append(int(d.split(b" ")[1]) if d else 0)
        except OSError:
            codes.append(0)  # cut while uploading (e.g. a 429 before the body was read)

    for _ in range(3):
        ts = [threading.Thread(target=one) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    time.sleep(2.5)
    print(f"{n} at once x 3 rounds of {len(body) / 1e6:.1f} MB: codes {sorted(codes)} (0 = connection cut); "
          f"RSS start {base} MiB, peak {rss('VmHWM')} MiB, 2.5 s after {rss('VmRSS')} MiB")
finally:
    p.terminate()
    p.wait()
