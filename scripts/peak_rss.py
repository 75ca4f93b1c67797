#!/usr/bin/env python3
"""Peak RSS (KiB) of the largest process of a command's tree, for `make bench`.

A firing is two processes: the keeper (the process started) and the runner it forks, which outlives
the keeper by a moment. GNU time reports the process it started (the keeper); this script also runs
as a child subreaper, so the runner is re-parented here when the keeper ends, and its own peak
(ru_maxrss from wait4) is taken too. Prints the larger. Usage: peak_rss.py COMMAND [ARG...]
"""
import ctypes, os, sys, tempfile

PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
out = tempfile.NamedTemporaryFile(delete=False)
out.close()
child = os.fork()
if child == 0:
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    # GNU time is started fresh (a process's peak survives exec, and this one is Python's size).
    os.execv("/usr/bin/time", ["time", "-f", "%M", "-o", out.name] + sys.argv[1:])
peak = 0
while True:
    try:
        pid, _, usage = os.wait4(-1, 0)
    except ChildProcessError:
        break
    if pid != child:
        peak = max(peak, usage.ru_maxrss)
with open(out.name) as f:
    peak = max(peak, int(f.read().split()[-1]))
os.unlink(out.name)
print(peak)
