#!/usr/bin/env python3
"""The cron library the `cron` schedule is checked against (tests/it/cron.rs): cronsim, which
reads expressions as Debian's cron does (day-of-month *or* day-of-week, DST handled as cron
does). Reads one JSON query per line on stdin and writes one JSON answer per line:

    {"expr": "30 2 * * 1-5", "zone": "Europe/Berlin", "after": 1780000000, "until": 1790000000, "max": 500}
    -> [1780001234, ...]    the firings in (after, until], at most max, as Unix seconds

cronsim takes no @ shortcuts; they are expanded here as crontab(5) defines them, independently of
the program's own table.
"""
import json
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from cronsim import CronSim

SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

for line in sys.stdin:
    q = json.loads(line)
    expr = SHORTCUTS.get(q["expr"].lower(), q["expr"])
    start = datetime.fromtimestamp(q["after"], timezone.utc).astimezone(ZoneInfo(q["zone"]))
    out = []
    for t in CronSim(expr, start):
        ts = int(t.timestamp())
        if ts > q["until"] or len(out) >= q["max"]:
            break
        out.append(ts)
    print(json.dumps(out), flush=True)
