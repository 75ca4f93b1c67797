#!/usr/bin/env python3
"""Interleaved, paired timings of a few commands, for `make bench`.

Usage: paired.py OUT.json N COMMAND...   (each COMMAND one string, split like a shell would)

Each of N iterations runs every command once, in a shuffled order, so all of them meet the same
moment of a noisy machine; a command's time is the wall time from its start until it is reaped,
as hyperfine -N measures it (stdin, stdout and stderr are /dev/null). Ratios are then taken per
iteration, between runs milliseconds apart, and their median kept: blocks of one command's
runs (hyperfine's, even in alternating rounds) let a wave of noise longer than a block decide a
comparison, and made the firing's ratio swing 0.77-1.06 between identical runs. Writes
{"commands": [...], "times_ms": [[...], ...]}, one list of N times per command.
"""
import json, os, random, shlex, sys, time

out, n, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
null = os.open(os.devnull, os.O_RDWR)
io = [(os.POSIX_SPAWN_DUP2, null, fd) for fd in (0, 1, 2)]


def once(words):
    start = time.perf_counter_ns()
    pid = os.posix_spawnp(words[0], words, os.environ, file_actions=io)
    os.waitpid(pid, 0)
    return (time.perf_counter_ns() - start) / 1e6


parsed = [shlex.split(c) for c in commands]
for words in parsed:
    for _ in range(10):
        once(words)
order, times = random.Random(0), [[] for _ in parsed]
for _ in range(n):
    turn = list(range(len(parsed)))
    order.shuffle(turn)
    for i in turn:
        times[i].append(once(parsed[i]))
with open(out, "w") as f:
    json.dump({"commands": commands, "times_ms": times}, f)
