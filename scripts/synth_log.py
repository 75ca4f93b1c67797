#!/usr/bin/env python3
"""Writes a valid, hash-chained run log of N lines into DATA_ROOT, for benchmarks.

Usage: synth_log.py N DATA_ROOT [AUTOMATIONS [recent]]

With AUTOMATIONS (default 1) the runs are spread round-robin over that many automations named
job-01, job-02, ... (one, "synthetic", without it). With `recent`, the lines end now and each
automation runs hourly (its last 24 runs fall in the last 24 hours, as an hourly job's do);
without it, every line is of 2026-01-01.

Lines alternate started/finished pairs and skipped events, like a busy machine's log. Past
60 MiB a segment is closed as runs-<stamp>.jsonl and the next starts with a `rotated` line,
exactly as the runner rotates, so `automations log verify` passes on the result.
"""
import datetime
import hashlib
import json
import os
import sys

SEGMENT = 60 * 1024 * 1024


def main():
    n, root = int(sys.argv[1]), sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    names = ["job-%02d" % (k + 1) for k in range(count)] or ["synthetic"]
    recent = len(sys.argv) > 4 and sys.argv[4] == "recent"
    now = datetime.datetime.now(datetime.timezone.utc)
    gap = 3600.0 / (3 * len(names))

    def stamp(i):
        if not recent:
            return "2026-01-01T00:00:00.%03dZ" % (i % 1000)
        t = now - datetime.timedelta(seconds=(n - i) * gap)
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
    os.makedirs(root, mode=0o700, exist_ok=True)
    prev = "genesis"
    seg_bytes, seg_no, written = 0, 0, 0
    out = open(os.path.join(root, "runs.jsonl"), "wb")
    clock = {"boot": "bench", "awake_ms": 1, "total_ms": 1}
    while written < n:
        i = written
        at = stamp(i)
        if i % 3 == 0:
            ev = {"v": 1, "event": "started", "run": "r%d" % i, "trigger": "schedule", "pid": 1,
                  "definition": "0" * 64, "clock": clock}
        elif i % 3 == 1:
            ev = {"v": 1, "event": "finished", "run": "r%d" % (i - 1), "outcome": "ok", "exit_code": 0,
                  "signal": None, "duration_ms": 5, "error": None, "stdout_tail": "ok\n", "stderr_tail": "",
                  "dropped": {"stdout": 0, "stderr": 0}, "facts": {"n": 1}, "headline": "n", "http": None,
                  "leftover_processes": 0, "clock": clock, "trigger": "schedule", "started_at": stamp(i - 1)}
        else:
            ev = {"v": 1, "event": "skipped", "trigger": "schedule", "reason": "already_running"}
        ev.update({"name": names[(i // 3) % len(names)], "at": at, "prev": prev})
        line = json.dumps(ev, separators=(",", ":")).encode()
        if seg_bytes + len(line) + 1 > SEGMENT:
            out.close()
            seg_no += 1
            name = "runs-20260101T0000%02d.000Z.jsonl" % seg_no
            os.rename(os.path.join(root, "runs.jsonl"), os.path.join(root, name))
            out = open(os.path.join(root, "runs.jsonl"), "wb")
            seg_bytes = 0
            rot = {"v": 1, "event": "rotated", "previous": name, "tail": prev, "name": "", "at": at, "prev": prev}
            line = json.dumps(rot, separators=(",", ":")).encode()
        out.write(line + b"\n")
        seg_bytes += len(line) + 1
        prev = hashlib.sha256(line).hexdigest()
        written += 1
    out.close()


if __name__ == "__main__":
    main()
