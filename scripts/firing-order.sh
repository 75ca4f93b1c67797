#!/usr/bin/env bash
# Regenerates scripts/firing.order: the functions a firing executes, in the order it first reaches
# them, which the release build (Makefile, Linux) hands to the linker as its symbol ordering file.
# Placed side by side, they are faulted in as a few neighbouring pages instead of being spread over
# the 7 MB of code the rest of the binary needs: a firing's peak RSS halves, and it starts faster
# (docs/performance.md). Symbols that no longer exist are skipped by the linker, so a stale list only
# costs memory; `make bench` says how much of it the binary still has. Needs valgrind.
#
# Each C library has its own list (the symbols' names differ with the target): a musl build's is
# scripts/firing-musl.order, a glibc build's scripts/firing.order. `make firing-order` runs this for
# the build `make release` makes, then relinks.
#
# Usage: scripts/firing-order.sh BIN   (a release build of this checkout)
set -euo pipefail
BIN=$(realpath "$1")
cd "$(dirname "$0")/.."
order=$(scripts/order-file.sh "$BIN")
command -v valgrind >/dev/null || { echo "firing-order: valgrind is missing (apt-get install valgrind)" >&2; exit 3; }
work=$(mktemp -d /tmp/automations-order.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/automations"
printf 'name = "noop"\ncommand = ["/bin/true"]\n' >"$work/root/automations/noop.toml"
printf 'name = "loud"\ncommand = ["sh", "-c", "echo out; echo err >&2; exit 3"]\noutbound = true\n' >"$work/root/automations/loud.toml"
export AUTOMATIONS_NOTIFY=off USER=${USER:-$(id -un)}
# Scheduled firings run only what was installed: the data root holds the records that approve
# these definitions, as `install` writes them (bench.sh does the same).
mkdir -p "$work/data/state/installed"
for f in "$work"/root/automations/*.toml; do
    n=$(basename "$f" .toml)
    printf '{"label":"local.automations.%s","target":"systemd","files":{},"definition":"%s","bin":"%s","root":"%s","data_root":"%s","installed_at":"2026-01-01T00:00:00Z","pinned":true}\n' \
        "$n" "$(sha256sum "$f" | cut -d' ' -f1)" "$BIN" "$work/root" "$work/data" >"$work/data/state/installed/$n.json"
done
fire() { valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.%p" \
    "$BIN" run "$1" --trigger schedule --root "$work/root" --data-root "$work/data" --namespace automations \
    >/dev/null 2>&1 || true; }
# The first firing creates the data root; the ones after are what every later firing does: the
# command ok, and a failure of an outbound automation (its auto-pause check), then the same with
# notifications configured (the look after the run; nothing is delivered: no transition yet).
fire noop
rm -f "$work"/cg.*
fire noop
fire loud
printf '[ntfy]\nurl = "http://127.0.0.1:9/order"\n' >"$work/data/notify.toml"
chmod 600 "$work/data/notify.toml"
unset AUTOMATIONS_NOTIFY
fire loud
python3 - "$work" <<'PY' >"$order"
import glob, re, sys
seen, names = set(), []
for path in sorted(glob.glob(sys.argv[1] + "/cg.*")):
    for line in open(path, errors="replace"):
        m = re.match(r"c?fn=\(\d+\) (\S+)$", line.strip())
        # ThinLTO's promoted locals carry a per-build suffix: they would never match again.
        if m and m.group(1) not in seen and ".llvm." not in m.group(1) and not m.group(1).startswith("0x"):
            seen.add(m.group(1))
            names.append(m.group(1))
print("\n".join(names))
PY
echo "firing-order: $(wc -l <"$order") symbols in $order"
