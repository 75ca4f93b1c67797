#!/usr/bin/env bash
# make bench: the runner's costs as ratios against baselines timed in the same run, on this
# machine. Exits 1 when a target of the README's Performance table is missed.
#
# Usage: scripts/bench.sh BIN
set -euo pipefail
BIN=$(realpath "$1")
for tool in hyperfine python3 flock timeout /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install hyperfine time util-linux coreutils python3)" >&2; exit 3; }
done
RUNS=${BENCH_RUNS:-300}
work=$(mktemp -d /tmp/automations-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/automations"
cat > "$root/automations/noop.toml" <<'TOML'
name = "noop"
command = ["/bin/true"]
TOML
cat > "$root/automations/loud.toml" <<'TOML'
name = "loud"
command = ["head", "-c", "20000000", "/dev/zero"]
TOML
cat > "$root/automations/some.toml" <<'TOML'
name = "some"
command = ["head", "-c", "2000000", "/dev/zero"]
TOML
cat > "$root/automations/term.toml" <<'TOML'
name = "term"
command = ["sleep", "300"]
timeout_seconds = 1
TOML
export USER=${USER:-$(id -un)} AUTOMATIONS_NOTIFY=off
A="$BIN --root $root"
# A firing exactly as a unit runs it (see units::program_arguments).
fire() { echo "$BIN run $1 --trigger schedule --root $root --data-root $2 --namespace automations"; }
touch "$work/L"

echo "== generating a 1,000,000-line log and a 1,000-line log"
python3 "$(dirname "$0")/synth_log.py" 1000000 "$work/d-1m"
python3 "$(dirname "$0")/synth_log.py" 1000 "$work/d-1k"
mkdir -p "$work/d-empty"

hf() { hyperfine -N --style basic --warmup 20 --runs "$RUNS" --export-json "$@" 2>&1 | grep -E '^(Benchmark|  Time)'; }

echo "== a firing of noop (the argv its unit runs) vs flock + timeout"
hf "$work/h-run.json" "$(fire noop "$work/d-run")" "flock -n $work/L timeout 300 /bin/true" "/bin/true"
echo "== appends: run noop with an empty log vs a 1,000,000-line log"
hf "$work/h-log.json" "$(fire noop "$work/d-empty")" "$(fire noop "$work/d-1m")"
echo "== readers: runs -n 20 on a 1,000-line log vs a 1,000,000-line log"
hf "$work/h-runs.json" "$A --data-root $work/d-1k runs -n 20" "$A --data-root $work/d-1m runs -n 20"

rss() { # peak RSS in KiB over 5 runs of `run $1`
    local max=0 v
    for _ in 1 2 3 4 5; do
        v=$( { /usr/bin/time -f '%M' $(fire "$1" "$work/d-rss") >/dev/null; } 2>&1 | tail -n 1)
        ((v > max)) && max=$v
    done
    echo "$max"
}
rss_noop=$(rss noop)
rss_some=$(rss some)
rss_loud=$(rss loud)

overshoot=0
for _ in 1 2 3; do
    $A --data-root "$work/d-term" run term >/dev/null || true
    ms=$($A --data-root "$work/d-term" runs term -n 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["duration_ms"])')
    ((ms - 1000 > overshoot)) && overshoot=$((ms - 1000))
done

python3 - "$work" "$rss_noop" "$rss_some" "$rss_loud" "$overshoot" <<'PY'
import json, sys
work, rss_noop, rss_some, rss_loud, overshoot = sys.argv[1], *map(int, sys.argv[2:])
def means(name):
    return [r["mean"] * 1000 for r in json.load(open(f"{work}/{name}"))["results"]]
run, flock, true = means("h-run.json")
empty, million = means("h-log.json")
k1, m1 = means("h-runs.json")
rows = [
    ("run noop / flock -n L timeout 300 /bin/true", run / flock, "<= 1.0", run / flock <= 1.0,
     f"{run:.2f} ms vs {flock:.2f} ms (bare /bin/true {true:.2f} ms)"),
    ("peak RSS of run noop", rss_noop / 1024, "<= 4 MiB", rss_noop <= 4096, f"{rss_noop} KiB"),
    ("peak RSS of run with 20 MB of output", rss_loud / 1024, "<= 4 MiB", rss_loud <= 4096, f"{rss_loud} KiB"),
    ("peak RSS, 20 MB of output / 2 MB of output", rss_loud / rss_some, "<= 1.02", rss_loud <= rss_some * 1.02,
     f"{rss_loud} KiB vs {rss_some} KiB (no output: {rss_noop} KiB)"),
    ("run noop, 1,000,000-line log / empty log", million / empty, "<= 1.1", million / empty <= 1.1,
     f"{million:.2f} ms vs {empty:.2f} ms"),
    ("runs -n 20, 1,000,000-line log / 1,000-line log", m1 / k1, "<= 2", m1 / k1 <= 2,
     f"{m1:.2f} ms vs {k1:.2f} ms"),
    ("timeout overshoot of a command that dies on TERM", overshoot, "<= 100 ms", overshoot <= 100,
     f"{overshoot} ms past the deadline"),
]
print()
print(f"{'measure':52} {'ratio':>7}  {'target':9} {'':4}  measured")
failed = 0
for name, ratio, target, ok, detail in rows:
    failed += not ok
    print(f"{name:52} {ratio:7.2f}  {target:9} {'ok' if ok else 'MISS':4}  {detail}")
sys.exit(1 if failed else 0)
PY
