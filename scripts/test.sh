#!/usr/bin/env bash
# `make test`: both tiers of tests, once each, in the `test-build` profile (Cargo.toml): the release
# build's dependencies with this crate compiled at opt-level 0, the same program as `make release`
# builds, a minute and more sooner (docs/performance.md). The hermetic tier is what a bare `cargo test` runs anywhere; the
# other tier (#[ignore]d, each saying the component it needs) runs against real components: a
# private systemd user manager, gnome-keyring, Chromium, Prometheus, the test venv's libraries…
# Their prerequisites are checked first (scripts/test-prereqs.sh: installed when this is root on
# Debian, else the one command that installs them is printed), and several of them need root.
#
# A test that cannot run fails (tests/it/harness.rs `skip`), unless AUTOMATIONS_TEST_SKIP_REAL=1
# was given outside CI; then it is written to a ledger and counted here, so a run with skips never
# reads as a full pass.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

skip_real=${AUTOMATIONS_TEST_SKIP_REAL:-}
if [[ -n ${CI:-} && ${CI:-} != false && ${CI:-} != 0 ]]; then
    skip_real=
fi
if [[ $(id -u) != 0 && $skip_real != 1 ]]; then
    cat >&2 <<MSG
make test: the real-component tier needs root (a private systemd user manager in a mount
namespace, tmpfs mounts, another uid). Run it as root:
    sudo make test
or run the hermetic tier alone, which needs nothing but Rust:
    cargo test
(AUTOMATIONS_TEST_SKIP_REAL=1 make test runs both and counts what it had to skip.)
MSG
    exit 3
fi

scripts/test-prereqs.sh
# The release artifacts, which one test of the real tier unpacks, runs and installs.
build_dist=
if [[ $skip_real != 1 ]] || command -v musl-gcc >/dev/null; then
    build_dist=1
fi
ledger=$(mktemp "${TMPDIR:-/tmp}/automations-skips.XXXXXX")
trap 'rm -f "$ledger"' EXIT
export AUTOMATIONS_TEST_SKIP_LOG=$ledger

# Most tests wait on something outside (a timer, a server, a child): more of them at once than
# there are cores keeps the machine busy (RUST_TEST_THREADS, libtest's own setting).
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-6}
status=0
dist_test=dist::the_release_artifacts_are_whole_and_install
wine_test=wine::the_windows_build_runs_a_folder_under_wine
# The Windows build the Wine test runs (docs/windows.md), linted as it compiles: clippy's driver
# stands in for rustc on this crate (its dependencies are compiled by rustc as ever), with warnings
# denied, so one compile is both the Windows lint CI asks for and the program the test runs.
# Without its target or C compiler (a run that may skip), the test says SKIPPED.
windows_build() {
    if [[ $skip_real == 1 ]] && ! { command -v x86_64-w64-mingw32-gcc >/dev/null &&
        rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; }; then
        echo "make test: no Windows target or mingw-w64 here; the Wine test will be SKIPPED" >&2
        return 0
    fi
    local clippy
    clippy=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) || {
        echo "make test: clippy-driver is missing (rustup component add clippy)" >&2
        return 3
    }
    RUSTC_WORKSPACE_WRAPPER=$clippy RUSTFLAGS="-D warnings" nice -n 19 \
        "$CARGO" build --locked --profile wine --target x86_64-pc-windows-gnu
}
if [[ -n $build_dist && $# == 0 ]]; then
    # The whole suite: the release artifacts and the Windows build build at the lowest priority
    # beside the tests' build and then while the tests run (other profiles and targets, which
    # cargo builds at once in the same target folder; the tests mostly wait on timers, servers
    # and children), taking what the others leave idle; the two tests that need them run last.
    mkdir -p target
    dist_log=target/make-test-dist.log
    # The two side by side: each one's serial stretches (a last crate, a link) leave a core the
    # other takes.
    {
        windows_log=target/make-test-windows.log
        windows_build >"$windows_log" 2>&1 &
        windows=$!
        dist_status=0
        CARGO=$CARGO nice -n 19 scripts/dist.sh || dist_status=$?
        windows_status=0
        wait "$windows" || windows_status=$?
        cat "$windows_log"
        ((dist_status == 0 && windows_status == 0))
    } >"$dist_log" 2>&1 &
    dist_pid=$!
    # Should the tests' build fail (set -e ends this script), the release build ends with it.
    trap 'rm -f "$ledger"; kill "$dist_pid" 2>/dev/null || true' EXIT
    "$CARGO" test --locked --profile test-build --no-run
    "$CARGO" test --locked --profile test-build -- --include-ignored --skip "$dist_test" \
        --skip "$wine_test" || status=$?
    if ! wait "$dist_pid"; then
        cat "$dist_log" >&2
        echo "make test: make dist or the Windows build failed (above)" >&2
        exit 1
    fi
    cat "$dist_log"
    "$CARGO" test --locked --profile test-build --test it -- --include-ignored --exact "$dist_test" \
        "$wine_test" || status=$?
else
    if [[ -n $build_dist ]]; then
        CARGO=$CARGO scripts/dist.sh
        windows_build
    fi
    "$CARGO" test --locked --profile test-build "$@" -- --include-ignored || status=$?
fi

skipped=$(sort -u "$ledger" | grep -c . || true)
if ((status != 0)); then
    echo "make test: FAILED (exit status $status)" >&2
    exit "$status"
fi
if ((skipped > 0)); then
    echo "make test: passed, but $skipped test(s) were SKIPPED because AUTOMATIONS_TEST_SKIP_REAL=1 — not a full pass:" >&2
    sort -u "$ledger" | sed 's/^/    /' >&2
    exit 0
fi
if (($# > 0)); then
    echo "make test: the tests selected by '$*' passed"
    exit 0
fi
echo "make test: every test of both tiers ran and passed (none skipped)"
