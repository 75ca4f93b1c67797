#!/usr/bin/env bash
# make bench: the runner's, the readers', the HTTP client's and the dashboard's costs as ratios
# against baselines timed in the same run, on this machine. Exits 1 when a target of
# docs/performance.md is missed.
#
# Usage: scripts/bench.sh BIN [DIST_BIN]    (DIST_BIN: `make dist`'s binary, measured beside, not
#                                           held to a target)
set -euo pipefail
BIN=$(realpath "$1")
DIST=${2:+$(realpath "$2")}
[[ -n $DIST && -x $DIST ]] || DIST=
for tool in hyperfine python3 flock timeout /usr/bin/time curl; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install hyperfine time util-linux coreutils python3 curl)" >&2; exit 3; }
done
RUNS=${BENCH_RUNS:-300}
work=$(mktemp -d /tmp/automations-bench.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
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
cat > "$root/automations/fail.toml" <<'TOML'
name = "fail"
command = ["/bin/false"]
TOML
export USER=${USER:-$(id -un)} AUTOMATIONS_NOTIFY=off
A="$BIN --root $root"
# A scheduled firing runs only what was installed (docs/units.md, "What runs is what you
# approved"): every data root a firing below uses holds the install record that approves these
# definitions, as `install` writes it, so each firing pays for its pin check.
approve() {
    mkdir -p "$1/state/installed"
    for f in "$root"/automations/*.toml; do
        n=$(basename "$f" .toml)
        printf '{"label":"local.automations.%s","target":"systemd","files":{},"definition":"%s","bin":"%s","root":"%s","data_root":"%s","installed_at":"2026-01-01T00:00:00Z","pinned":true}\n' \
            "$n" "$(sha256sum "$f" | cut -d' ' -f1)" "$BIN" "$root" "$1" >"$1/state/installed/$n.json"
    done
}
# A firing exactly as a unit runs it (see units::program_arguments).
fire() { echo "$BIN run $1 --trigger schedule --root $root --data-root $2 --namespace automations"; }
touch "$work/L"
# The binaries as an installed binary is after a restart: read from the disk. The linker's (or
# cp's) fresh write leaves a file in large page-cache folios, which one page fault maps whole,
# and a firing of it shows 1.5 MB more resident (shared, clean page cache, no memory of its own).
evict() { sync; python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
evict "$BIN" ${DIST:+"$DIST"}

# Twenty automations: job-01 … job-19 have runs in the synthetic logs, `never` has none.
root20=$work/root20
mkdir -p "$root20/automations"
for n in $(seq -f 'job-%02g' 1 19) never; do
    printf 'name = "%s"\ncommand = ["/bin/true"]\n[schedule]\nevery_minutes = 60\n' "$n" >"$root20/automations/$n.toml"
done
A20="$BIN --root $root20"

echo "== generating 1,000,000-line and 1,000-line logs (one automation; 19 of 20 automations)"
python3 "$(dirname "$0")/synth_log.py" 1000000 "$work/d-1m"
python3 "$(dirname "$0")/synth_log.py" 1000 "$work/d-1k"
python3 "$(dirname "$0")/synth_log.py" 1000000 "$work/m-1m" 19
python3 "$(dirname "$0")/synth_log.py" 1000 "$work/m-1k" 19
mkdir -p "$work/d-empty"
for d in d-run d-nolook d-empty d-1m d-rss; do approve "$work/$d"; done
# The first reader of a log builds the per-automation index once (docs/running.md); time that
# separately, so the comparisons below are of every later read.
t0=$(date +%s%N)
$A20 --data-root "$work/m-1m" list >/dev/null
index_ms=$((($(date +%s%N) - t0) / 1000000))
# The synthetic logs are about a gigabyte of dirty pages: written back now, not by the kernel's own
# writeback half a minute later, in the middle of the firings timed below (each of which waits
# for its `started` line to reach the disk, while the idiom writes nothing).
sync

hf() { hyperfine -N --style basic --warmup 20 --runs "$RUNS" --export-json "$@" 2>&1 | grep -E '^(Benchmark|  Time)'; }

# A firing against flock + timeout, interleaved and paired (scripts/paired.py): each of PAIRED
# iterations runs every command once in a shuffled order, and the ratio is the median of the
# iterations' own ratios. The manual run (`automations run noop`, which prints its summary line)
# and a bare /bin/true are timed in the same iterations.
PAIRED=${BENCH_PAIRED:-600}
paired() { python3 "$(dirname "$0")/paired.py" "$@"; }
echo "== a firing of noop (the argv its unit runs) and a manual run vs flock + timeout, $PAIRED paired iterations"
paired "$work/p-run.json" "$PAIRED" "$(fire noop "$work/d-run")" "flock -n $work/L timeout 300 /bin/true" "/bin/true" \
    "$A --data-root $work/d-manual run noop"

# A firing beside 1,000 definitions against one beside none: what follows it is read from the
# index install keeps, never from every definition (docs/triggers.md).
root1k=$work/root1k
mkdir -p "$root1k/automations"
cp "$root/automations/noop.toml" "$root1k/automations/"
for k in $(seq -f '%04g' 1 999); do
    printf 'name = "job-%s"\ncommand = ["/bin/true"]\n[schedule]\nevery_minutes = 60\n' "$k" >"$root1k/automations/job-$k.toml"
done
mkdir -p "$work/d-1kdefs"
approve "$work/d-1kdefs"
fire1k() { echo "$BIN run $1 --trigger schedule --root $root1k --data-root $2 --namespace automations"; }
echo "== a firing of noop beside 1,000 definitions vs beside five, $PAIRED paired iterations"
paired "$work/p-defs.json" "$PAIRED" "$(fire noop "$work/d-run")" "$(fire1k noop "$work/d-1kdefs")"
if [[ -n $DIST ]]; then
    echo "== make dist's binary: a firing of noop vs flock + timeout, $PAIRED paired iterations"
    mkdir -p "$work/d-dist"
    approve "$work/d-dist"
    paired "$work/p-dist.json" "$PAIRED" "$DIST run noop --trigger schedule --root $root --data-root $work/d-dist --namespace automations" \
        "flock -n $work/L timeout 300 /bin/true"
fi

# The runner's look after a failed run, with notifications configured (ntfy to a local server that
# takes every message), against the same failed run without: paired too.
python3 -c 'import http.server as h, sys
class H(h.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
s = h.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' >"$work/ntfy.port" 2>/dev/null &
pids+=($!)
until [[ -s $work/ntfy.port ]]; do sleep 0.05; done
mkdir -m 700 "$work/d-look"
approve "$work/d-look"
printf '[ntfy]\nurl = "http://127.0.0.1:%s/bench"\n' "$(cat "$work/ntfy.port")" >"$work/d-look/notify.toml"
chmod 600 "$work/d-look/notify.toml"
echo "== a failed run with notifications configured (the look after it) vs without, $PAIRED paired iterations"
(unset AUTOMATIONS_NOTIFY && paired "$work/p-look.json" "$PAIRED" "$(fire fail "$work/d-nolook")" "$(fire fail "$work/d-look")")
# A run that rewrites the metrics textfile (its own samples merged into the file) against the same
# run without metrics.toml.
mkdir -m 700 "$work/d-prom" "$work/d-noprom"
approve "$work/d-prom"
approve "$work/d-noprom"
printf 'textfile = "%s/automations.prom"\n' "$work" >"$work/d-prom/metrics.toml"
chmod 600 "$work/d-prom/metrics.toml"
echo "== a run with the metrics textfile vs without, $PAIRED paired iterations"
paired "$work/p-prom.json" "$PAIRED" "$(fire noop "$work/d-noprom")" "$(fire noop "$work/d-prom")"
[[ -s $work/automations.prom ]] || { echo "bench: the firings wrote no metrics textfile" >&2; exit 1; }
# A firing appends and never reads the log: the two should cost the same, so these two near-equal
# numbers are paired too (one noise wave decided it once: 1.17).
echo "== appends: run noop with an empty log vs a 1,000,000-line log, $PAIRED paired iterations"
paired "$work/p-log.json" "$PAIRED" "$(fire noop "$work/d-empty")" "$(fire noop "$work/d-1m")"
echo "== readers: runs -n 20 on a 1,000-line log vs a 1,000,000-line log"
hf "$work/h-runs.json" "$A --data-root $work/d-1k runs -n 20" "$A --data-root $work/d-1m runs -n 20"
echo "== 20 automations: list, runs NAME -n 20 (one that ran, one that never did), health; 1,000 vs 1,000,000 lines"
hf "$work/h-list.json" "$A20 --data-root $work/m-1k list" "$A20 --data-root $work/m-1m list"
hf "$work/h-runs-name.json" "$A20 --data-root $work/m-1k runs job-07 -n 20" "$A20 --data-root $work/m-1m runs job-07 -n 20"
hf "$work/h-runs-never.json" "$A20 --data-root $work/m-1k runs never -n 20" "$A20 --data-root $work/m-1m runs never -n 20"
hf "$work/h-health.json" -i "$A20 --data-root $work/m-1k health" "$A20 --data-root $work/m-1m health"

# One local server answers the HTTP client and curl alike: a 1 KiB page and a 50 MB one.
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' a >"$work/www/page"
head -c 50000000 /dev/zero >"$work/www/big"
python3 -c 'import http.server as h, functools as f, sys
h.SimpleHTTPRequestHandler.log_message = lambda *a: None
s = h.ThreadingHTTPServer(("127.0.0.1", 0), f.partial(h.SimpleHTTPRequestHandler, directory=sys.argv[1]))
print(s.server_address[1], flush=True)
s.serve_forever()' "$work/www" >"$work/www.port" 2>/dev/null &
pids+=($!)
until [[ -s $work/www.port ]]; do sleep 0.05; done
www=http://127.0.0.1:$(cat "$work/www.port")
echo "== http get of a 1 KiB page vs curl, the same server"
hf "$work/h-http.json" "$BIN http get $www/page" "curl -s -o /dev/null $www/page"
peak() { # peak RSS in KiB of one command, whatever its exit status
    /usr/bin/time -o "$work/time.out" -f '%M' "$@" >/dev/null 2>&1 || true
    tail -n 1 "$work/time.out"
}
rss_http_cap=$(peak "$BIN" http get "$www/big" --max-bytes 1000000)
rss_http_file=$(peak "$BIN" http get "$www/big" --max-bytes 60000000 --output "$work/big.out")
[[ $(stat -c %s "$work/big.out") == 50000000 ]] || { echo "bench: http get wrote a short file" >&2; exit 1; }

# The dashboard's first page, 20 automations, over each log; then its memory when idle.
dash() { # starts a dashboard on data root $1 (definitions of root $2, else the twenty), prints "PID URL"
    "$BIN" --root "${2:-$root20}" --data-root "$1" dashboard --no-open >"$1.dash" 2>/dev/null &
    local pid=$!
    until grep -q '^dashboard: ' "$1.dash" 2>/dev/null; do sleep 0.05; done
    echo "$pid $(sed -n 's/^dashboard: \(http:[^? ]*\).*/\1/p' "$1.dash")"
}
read -r dpid_k url_k < <(dash "$work/m-1k")
pids+=("$dpid_k")
read -r dpid_m url_m < <(dash "$work/m-1m")
pids+=("$dpid_m")
cookie() { # DATA_ROOT URL: the session cookie a browser gets for the token
    local c
    c=$(curl -sf -o /dev/null -D - "$2?token=$(cat "$1/dashboard.token")" | tr -d '\r' |
        sed -n 's/^[Ss]et-[Cc]ookie: \(automations_dashboard=[^;]*\).*/\1/p')
    [[ -n $c ]] || { echo "bench: the dashboard on $1 gave no cookie" >&2; exit 1; }
    echo "Cookie: $c"
}
echo "== the dashboard's page, 20 automations, 1,000 vs 1,000,000 lines"
hf "$work/h-dash.json" "curl -sf -o /dev/null -H '$(cookie "$work/m-1k" "$url_k")' $url_k" \
    "curl -sf -o /dev/null -H '$(cookie "$work/m-1m" "$url_m")' $url_m"
sleep 1
rss_dash=$(awk '/^VmRSS/ {print $2}' "/proc/$dpid_m/status")

# The same page while 5,000 idle connections are open to the server (a hostile neighbour), and the
# server's memory meanwhile.
port_k=${url_k##*:}; port_k=${port_k%%/*}
python3 - "$port_k" >"$work/crowd.out" <<'PY' &
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 10000), hard))
crowd = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20) for _ in range(5000)]
print("ready", flush=True)
time.sleep(600)
PY
crowd_pid=$!
pids+=("$crowd_pid")
until grep -q ready "$work/crowd.out" 2>/dev/null; do
    kill -0 "$crowd_pid" 2>/dev/null || { echo "bench: could not open 5,000 connections" >&2; exit 1; }
    sleep 0.1
done
echo "== the dashboard's page, 20 automations, 1,000 lines: alone vs with 5,000 idle connections open"
hf "$work/h-crowd.json" "curl -sf -o /dev/null -H '$(cookie "$work/m-1k" "$url_k")' $url_k"
rss_crowd=$(awk '/^VmRSS/ {print $2}' "/proc/$dpid_k/status")
kill "$crowd_pid" 2>/dev/null || true

# Peak RSS in KiB of one firing of $1: the larger of its two processes, keeper or runner.
peak_firing() { python3 "$(dirname "$0")/peak_rss.py" $(fire "$1" "$work/d-rss"); }
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
# 9 firings of each, alternating. The absolute bounds take the largest; "flat with output" compares
# medians, since one firing's peak lands on one of a few 128 KiB steps (where the heap's top falls)
# whatever its output: the largest of a few is a draw of those steps, not a measure of growth.
rss_noop=0 rss_loud=0
louds=() somes=()
for _ in 1 2 3 4 5 6 7 8 9; do
    v=$(peak_firing noop) && ((v > rss_noop)) && rss_noop=$v
    v=$(peak_firing loud) && louds+=("$v") && ((v > rss_loud)) && rss_loud=$v
    somes+=("$(peak_firing some)")
done
rss_loud_median=$(median "${louds[@]}")
rss_some_median=$(median "${somes[@]}")

# 10, 100 and 1,000 definitions with 100 runs each (and a skipped firing beside each run):
# validate, list, health, the dashboard's first page (its timeline's bars included) and the
# timeline's lines it fetches when "Per automation" opens, each with its index already built.
declare -A scale_url
for n in 10 100 1000; do
    sroot=$work/scale-$n
    mkdir -p "$sroot/automations"
    python3 - "$sroot/automations" "$n" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    name = "job-%02d" % (k + 1)
    open(f"{d}/{name}.toml", "w").write(f'name = "{name}"\ncommand = ["/bin/true"]\n[schedule]\nevery_minutes = 60\n')
PY
    # Their last 24 hours of hourly runs end now, and each is installed (an install record of
    # the definition as it is, as `install` writes one): the dashboard's timeline draws 24 runs
    # behind and 24 firings ahead on every line.
    python3 "$(dirname "$0")/synth_log.py" $((n * 300)) "$work/scale-d-$n" "$n" recent
    python3 - "$sroot" "$work/scale-d-$n" "$n" <<'PY'
import datetime, hashlib, json, os, sys
root, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(f"{data}/state/installed", mode=0o700, exist_ok=True)
at = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=30)).isoformat()
for k in range(n):
    name = "job-%02d" % (k + 1)
    sha = hashlib.sha256(open(f"{root}/automations/{name}.toml", "rb").read()).hexdigest()
    record = {"label": f"local.automations.{name}", "target": "systemd", "files": {},
              "definition": sha, "bin": "/usr/local/bin/automations", "root": root, "data_root": data,
              "installed_at": at, "pinned": True}
    with open(f"{data}/state/installed/{name}.json", "w") as f:
        json.dump(record, f)
# Their synthetic clock readings are of no boot of this machine, so the age of a success counts
# only as "at least" the log's spans: health would call every one stale (and exit 1), so the
# slack is wide, and every other rule judges as usual.
with open(os.open(f"{data}/health.toml", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
    f.write("[defaults]\nstale_intervals = 1000\n")
PY
    "$BIN" --root "$sroot" --data-root "$work/scale-d-$n" list >/dev/null
    read -r spid surl < <(dash "$work/scale-d-$n" "$sroot")
    pids+=("$spid")
    scale_url[$n]=$surl
done
# Absolute times on a shared machine drift by a quarter over minutes: three rounds, each size in
# turn, and the median of the rounds' medians.
for r in 1 2 3; do
    for n in 10 100 1000; do
        sroot=$work/scale-$n
        echo "== round $r, $n definitions, 100 runs each: validate, list, health, the dashboard's page, its timeline's lines"
        hyperfine -N --style basic --warmup 3 --runs 20 --export-json "$work/h-scale-$n-$r.json" \
            "$BIN --root $sroot --data-root $work/scale-d-$n validate" \
            "$BIN --root $sroot --data-root $work/scale-d-$n list" \
            "$BIN --root $sroot --data-root $work/scale-d-$n health" \
            "curl -sf -o /dev/null -H '$(cookie "$work/scale-d-$n" "${scale_url[$n]}")' ${scale_url[$n]}" \
            "curl -sf -o /dev/null -H '$(cookie "$work/scale-d-$n" "${scale_url[$n]}")' ${scale_url[$n]}api/timeline" 2>&1 | grep -E '^(Benchmark|  Time)'
    done
done
# metrics against health over the same 1,000 automations, paired: against its table (the
# difference is what metrics adds: each automation's firings counted, and 1.66 MB of samples
# written) and against --json, the output for programs (895 KB); 120 iterations, so the median of
# the ratios is steady enough for a guard at 1.0.
echo "== metrics vs health and health --json, 1,000 definitions x 100 runs, $((PAIRED / 5)) paired iterations"
paired "$work/p-metrics.json" "$((PAIRED / 5))" "$BIN --root $work/scale-1000 --data-root $work/scale-d-1000 health" \
    "$BIN --root $work/scale-1000 --data-root $work/scale-d-1000 metrics" \
    "$BIN --root $work/scale-1000 --data-root $work/scale-d-1000 health --json"

# make dist's binary beside the default build: its memory, and health over 1,000 automations
# (where musl's own allocator lost: docs/performance.md).
rss_dist=0
if [[ -n $DIST ]]; then
    for _ in 1 2 3; do
        v=$(python3 "$(dirname "$0")/peak_rss.py" "$DIST" run noop --trigger schedule --root "$root" \
            --data-root "$work/d-dist" --namespace automations) && ((v > rss_dist)) && rss_dist=$v
    done
    echo "== health, 1,000 definitions x 100 runs: the default build vs make dist's, $((PAIRED / 5)) paired iterations"
    paired "$work/p-dist-health.json" "$((PAIRED / 5))" "$BIN --root $work/scale-1000 --data-root $work/scale-d-1000 health" \
        "$DIST --root $work/scale-1000 --data-root $work/scale-d-1000 health"
fi

# Healthchecks pings: the command's start delay with and without them, and a blackholed ping base.
echo "== the command's start delay with Healthchecks pings vs without; a blackholed ping base"
python3 "$(dirname "$0")/ping_delay.py" "$BIN" "$work/root-ping" "$work" "$work/pings.json"

overshoot=0
for _ in 1 2 3; do
    $A --data-root "$work/d-term" run term >/dev/null || true
    ms=$($A --data-root "$work/d-term" runs term -n 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["duration_ms"])')
    ((ms - 1000 > overshoot)) && overshoot=$((ms - 1000))
done

python3 - "$work" "$PAIRED" "$rss_noop" "$rss_some_median" "$rss_loud" "$rss_loud_median" "$overshoot" "$index_ms" \
    "$rss_http_cap" "$rss_http_file" "$rss_dash" "$rss_crowd" "$rss_dist" <<'PY'
import json, os, statistics, sys
work = sys.argv[1]
(paired_n, rss_noop, rss_some, rss_loud, rss_loud_median, overshoot, index_ms, rss_http_cap,
 rss_http_file, rss_dash, rss_crowd, rss_dist) = map(int, sys.argv[2:])
def medians(name):
    # Medians: one stall of this machine's disk or scheduler must not decide a comparison.
    return [r["median"] * 1000 for r in json.load(open(f"{work}/{name}"))["results"]]
def paired(name, base):
    # Each command's median time, and per command the median and quartiles of its ratio to the
    # command at index `base`, taken within each iteration (scripts/paired.py).
    times = json.load(open(f"{work}/{name}"))["times_ms"]
    def ratios(i):
        r = sorted(a / b for a, b in zip(times[i], times[base]))
        return statistics.median(r), r[len(r) // 4], r[3 * len(r) // 4]
    return [statistics.median(t) for t in times], [ratios(i) for i in range(len(times))]
def spread(r, n=None):
    return f"median of {n or paired_n} paired ratios (quartiles {r[1]:.2f}-{r[2]:.2f})"
(run, flock, true, manual), (fire_r, _, _, manual_r) = paired("p-run.json", 1)
(beside5, beside1k), (_, defs_r) = paired("p-defs.json", 0)
(plain_fail, look_fail), (_, look_r) = paired("p-look.json", 0)
(empty, million), (_, log_r) = paired("p-log.json", 0)
(noprom, prom), (_, prom_r) = paired("p-prom.json", 0)
(health_k, metrics_k, health_json_k), (_, metrics_r, _) = paired("p-metrics.json", 0)
_, (_, metrics_json_r, _) = paired("p-metrics.json", 2)
scale_rounds = {n: [medians(f"h-scale-{n}-{r}.json") for r in (1, 2, 3)] for n in (10, 100, 1000)}
scale = {n: [statistics.median(m[i] for m in rs) for i in range(5)] for n, rs in scale_rounds.items()}
k1, m1 = medians("h-runs.json")
def pair(name, label, target, detail=""):
    small, big = medians(name)
    return (label, big / small, f"<= {target}", big / small <= target,
            f"{big:.2f} ms vs {small:.2f} ms{detail}")
http, curl = medians("h-http.json")
alone = medians("h-dash.json")[0]
crowd = medians("h-crowd.json")[0]
rows = [
    ("a firing of noop / flock -n L timeout 300 /bin/true", fire_r[0], "<= 1.3", fire_r[0] <= 1.3,
     f"{spread(fire_r)}; {run:.2f} ms vs {flock:.2f} ms (bare /bin/true {true:.2f} ms)"),
    ("a manual run noop / flock -n L timeout 300 /bin/true", manual_r[0], "<= 2.0", manual_r[0] <= 2.0,
     f"{spread(manual_r)}; {manual:.2f} ms (its command line read by clap)"),
    ("a firing beside 1,000 definitions / beside five", defs_r[0], "<= 1.1", defs_r[0] <= 1.1,
     f"{spread(defs_r)}; {beside1k:.2f} ms vs {beside5:.2f} ms"),
    ("a failed run with notify.toml / without", look_r[0], "<= 1.5", look_r[0] <= 1.5,
     f"{spread(look_r)}; {look_fail:.2f} ms vs {plain_fail:.2f} ms"),
    ("a run with the metrics textfile / without", prom_r[0], "<= 1.5", prom_r[0] <= 1.5,
     f"{spread(prom_r)}; {prom:.2f} ms vs {noprom:.2f} ms"),
    ("metrics / health, 1,000 definitions x 100 runs", metrics_r[0], "<= 1.15", metrics_r[0] <= 1.15,
     f"{spread(metrics_r, paired_n // 5)}; {metrics_k:.2f} ms vs {health_k:.2f} ms"),
    ("metrics / health --json, 1,000 definitions x 100 runs", metrics_json_r[0], "<= 1.0", metrics_json_r[0] <= 1.0,
     f"{spread(metrics_json_r, paired_n // 5)}; {metrics_k:.2f} ms vs {health_json_k:.2f} ms"),
    ("peak RSS of a firing of noop (keeper or runner)", rss_noop / 1024, "<= 8 MiB", rss_noop <= 8192, f"{rss_noop} KiB"),
    ("peak RSS of a firing with 20 MB of output", rss_loud / 1024, "<= 8 MiB", rss_loud <= 8192, f"{rss_loud} KiB"),
    ("peak RSS, 20 MB of output / 2 MB of output", rss_loud_median / rss_some, "<= 1.02",
     rss_loud_median <= rss_some * 1.02,
     f"medians of 9: {rss_loud_median} KiB vs {rss_some} KiB (no output, largest: {rss_noop} KiB)"),
    ("run noop, 1,000,000-line log / empty log", log_r[0], "<= 1.1", log_r[0] <= 1.1,
     f"{spread(log_r)}; {million:.2f} ms vs {empty:.2f} ms"),
    ("runs -n 20, 1,000,000-line log / 1,000-line log", m1 / k1, "<= 2", m1 / k1 <= 2,
     f"{m1:.2f} ms vs {k1:.2f} ms"),
    ("timeout overshoot of a command that dies on TERM", overshoot, "<= 100 ms", overshoot <= 100,
     f"{overshoot} ms past the deadline"),
    pair("h-list.json", "list (20 automations), 1,000,000 / 1,000 lines", 2,
         f"; the index built once in {index_ms} ms"),
    pair("h-runs-name.json", "runs job-07 -n 20, 1,000,000 / 1,000 lines", 2),
    pair("h-runs-never.json", "runs never -n 20 (no runs), 1,000,000 / 1,000", 2),
    pair("h-health.json", "health (20 automations), 1,000,000 / 1,000 lines", 2),
    ("http get of 1 KiB / curl -s -o /dev/null", http / curl, "<= 1.5", http / curl <= 1.5,
     f"{http:.2f} ms vs {curl:.2f} ms"),
    ("peak RSS of http get, 50 MB answer, --max-bytes 1e6", rss_http_cap / 1024, "<= 8 MiB",
     rss_http_cap <= 8192, f"{rss_http_cap} KiB (all 50 MB to --output: {rss_http_file} KiB)"),
    pair("h-dash.json", "dashboard page (20), 1,000,000 / 1,000 lines", 2),
    ("RSS of an idle dashboard after serving its page", rss_dash / 1024, "<= 15 MB",
     rss_dash * 1024 <= 15_000_000, f"{rss_dash} KiB"),
    ("dashboard page (20), 5,000 idle connections / none", crowd / alone, "<= 2",
     crowd / alone <= 2, f"{crowd:.2f} ms vs {alone:.2f} ms"),
    ("RSS of the dashboard with 5,000 idle connections", rss_crowd / 1024, "<= 15 MB",
     rss_crowd * 1024 <= 15_000_000, f"{rss_crowd} KiB"),
]
for i, (what, target) in enumerate([("validate", 100), ("list", 100), ("health", 100),
                                    ("the dashboard's page", 300),
                                    ("its timeline's lines, opened", 400)]):
    at = {n: scale[n][i] for n in scale}
    rows.append((f"{what}, 1,000 definitions x 100 runs (ms)", at[1000], f"<= {target}",
                 at[1000] <= target,
                 f"10: {at[10]:.1f} ms, 100: {at[100]:.1f} ms, 1,000: {at[1000]:.1f} ms"
                 f" (rounds {min(m[i] for m in scale_rounds[1000]):.1f}-{max(m[i] for m in scale_rounds[1000]):.1f};"
                 f" {at[1000] / at[10]:.1f}x from 10)"))
pings = json.load(open(f"{work}/pings.json"))
rows.append(("command start delay, with pings - without (ms)", pings["with_ms"] - pings["without_ms"],
             "<= 1", pings["with_ms"] - pings["without_ms"] <= 1,
             f"{pings['with_ms']:.2f} ms vs {pings['without_ms']:.2f} ms (median of the alternating runs)"))
rows.append(("a firing with a blackholed ping base (s)", pings["blackhole_s"], "<= 11",
             pings["blackhole_s"] <= 11, "the pings' bound is 10 s after the run; the run itself is instant"))
print()
print(f"{'measure':52} {'ratio':>7}  {'target':9} {'':4}  measured")
failed = 0
for name, ratio, target, ok, detail in rows:
    failed += not ok
    print(f"{name:52} {ratio:7.2f}  {target:9} {'ok' if ok else 'MISS':4}  {detail}")
print()
if os.path.exists(f"{work}/p-dist.json"):
    (dist_run, dist_flock), (dist_r, _) = paired("p-dist.json", 1)
    (h_plain, h_dist), (_, h_r) = paired("p-dist-health.json", 0)
    print("make dist's binary (static musl, mimalloc), beside the default build: printed, not held to a target")
    for name, ratio, detail in [
        ("a firing of noop / flock -n L timeout 300 /bin/true", dist_r[0],
         f"{spread(dist_r)}; {dist_run:.2f} ms vs {dist_flock:.2f} ms"),
        ("peak RSS of a firing of noop (MiB)", rss_dist / 1024, f"{rss_dist} KiB"),
        ("health, 1,000 definitions x 100 runs / default build", h_r[0],
         f"{spread(h_r, paired_n // 5)}; {h_dist:.2f} ms vs {h_plain:.2f} ms"),
    ]:
        print(f"{name:52} {ratio:7.2f}  {'':9} {'':4}  {detail}")
else:
    print("make dist's binary: not built (make dist), not measured")
sys.exit(1 if failed else 0)
PY
