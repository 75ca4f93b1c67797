#!/usr/bin/env bash
# `make test`: the prerequisites first (scripts/test-prereqs.sh), then every test once, in cargo's
# release profile: the unit tests, and the integration tests against
# target/<triple>/release/automations, the very binary `make release` builds (the one `make
# automations-install` copies and units run) with the target and flags the Makefile exports.
# Then one summary line. A test that cannot run fails (tests/it/harness.rs `skip`), unless
# AUTOMATIONS_TEST_SKIP_REAL=1 was given outside CI; then it is written to a ledger and counted
# here, so a run with skips never reads as a full pass.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

scripts/test-prereqs.sh

ledger=$(mktemp "${TMPDIR:-/tmp}/automations-skips.XXXXXX")
trap 'rm -f "$ledger"' EXIT
export AUTOMATIONS_TEST_SKIP_LOG=$ledger

# Most tests wait on something outside (a timer, a server, a child): more of them at once than
# there are cores keeps the machine busy (RUST_TEST_THREADS, libtest's own setting).
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-6}
status=0
"$CARGO" test --locked --release "$@" || status=$?

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
echo "make test: every test ran and passed (none skipped)"
