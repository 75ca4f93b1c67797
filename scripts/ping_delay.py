#!/usr/bin/env python3
"""make bench: what Healthchecks pings cost a firing .

Usage: ping_delay.py BIN ROOT WORK OUT.json

- The start delay: from just before the runner is started to the moment the command reads the
  clock (the command is `date +%s%N`, exec'ed directly; its output is read from the run log's
  `finished` line), for a firing without healthchecks.toml and one
  whose pings go to a local server that answers every ping at once; alternating, ROUNDS x 20.
- The bound: one firing whose ping base is a blackhole (a socket that accepts connections and
  never answers) ends within the documented 10 s after its run.
"""
import json, os, socket, statistics, subprocess, sys, threading, time
import http.server as hs

BIN, ROOT, WORK, OUT = sys.argv[1:5]
PING_KEY = "pk_0123456789abcdefghij"


class Ok(hs.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *a):
        pass


server = hs.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
threading.Thread(target=server.serve_forever, daemon=True).start()
hole = socket.socket()
hole.bind(("127.0.0.1", 0))
hole.listen(64)  # connections complete in the backlog; nothing is ever read or answered

os.makedirs(os.path.join(ROOT, "automations"), exist_ok=True)
with open(os.path.join(ROOT, "automations", "stamp.toml"), "w") as f:
    f.write('name = "stamp"\ncommand = ["date", "+%s%N"]\n')


def data_root(name, ping_url):
    d = os.path.join(WORK, name)
    os.makedirs(d, mode=0o700, exist_ok=True)
    if ping_url:
        p = os.path.join(d, "healthchecks.toml")
        with open(p, "w") as f:
            f.write(f'ping_url = "{ping_url}"\n')
        os.chmod(p, 0o600)
    return d


plain = data_root("d-noping", None)
pinged = data_root("d-ping", f"http://127.0.0.1:{server.server_address[1]}/ping")
blackholed = data_root("d-hole", f"http://127.0.0.1:{hole.getsockname()[1]}/ping")
env = dict(os.environ, AUTOMATIONS_HEALTHCHECKS_PING_KEY=PING_KEY)


def fire(d):
    t0 = time.time_ns()
    subprocess.run([BIN, "--root", ROOT, "--data-root", d, "run", "stamp"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    took = time.time_ns() - t0
    with open(os.path.join(d, "runs.jsonl"), "rb") as f:
        f.seek(max(0, os.path.getsize(f.name) - 65536))
        last = [json.loads(l) for l in f.read().splitlines()[1:] if b'"finished"' in l][-1]
    return (int(last["stdout_tail"].strip()) - t0) / 1e6, took / 1e6


for _ in range(5):
    fire(plain), fire(pinged)
delays = {plain: [], pinged: []}
for _ in range(int(os.environ.get("BENCH_ROUNDS", "9")) * 20):
    for d in (plain, pinged):
        delays[d].append(fire(d)[0])
t0 = time.monotonic()
_, _ = fire(blackholed)
hole_s = time.monotonic() - t0
result = {
    "without_ms": statistics.median(delays[plain]),
    "with_ms": statistics.median(delays[pinged]),
    "blackhole_s": hole_s,
}
json.dump(result, open(OUT, "w"))
print(f"start delay without pings {result['without_ms']:.2f} ms, with pings {result['with_ms']:.2f} ms;"
      f" a firing with a blackholed ping base {hole_s:.1f} s")
