#!/usr/bin/env bash
# `make test`: the prerequisites first (scripts/test-prereqs.sh), then every test, then the
# integration tests again against the release build (`make release`), then one summary line. A
# test that cannot run fails (tests/it/harness.rs `skip`), unless AUTOMATIONS_TEST_SKIP_REAL=1 was
# given outside CI; then it is written to a ledger and counted here, so a run with skips never
# reads as a full pass.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

scripts/test-prereqs.sh

ledger=$(mktemp "${TMPDIR:-/tmp}/automations-skips.XXXXXX")
trap 'rm -f "$ledger"' EXIT
export AUTOMATIONS_TEST_SKIP_LOG=$ledger

status=0
"$CARGO" test --locked "$@" || status=$?

# The integration suite once more, against the build `make release` makes (the one users install
# and units run): on Linux it links musl and another allocator, so it is a different program from
# the debug build above. Where musl cannot be built here (AUTOMATIONS_TEST_SKIP_REAL=1 without its
# prerequisites), the glibc release build is tested instead, and that is counted as a skip.
# (A run given test filters skips it: it is a developer's narrower question.)
if ((status == 0 && $# == 0)); then
    release=$(make --no-print-directory -s print-bin)
    host=$(rustc -vV | sed -n 's/^host: //p')
    if [[ $host == *-linux-gnu && $release != *-linux-musl/* ]]; then
        missing=$(make --no-print-directory -s print-musl-missing)
        why=${missing:+missing: $missing}
        why=${why:-LIBC=gnu was given}
        if [[ ${AUTOMATIONS_TEST_SKIP_REAL:-} != 1 ]] || [[ ${CI:-} != "" && ${CI:-} != 0 && ${CI:-} != false ]]; then
            echo "release suite: the release build would not be the musl one ($why); AUTOMATIONS_TEST_SKIP_REAL=1 make test (never under CI) tests the glibc one instead" >&2
            exit 3
        fi
        echo "release suite: the release build is not the musl one ($why), so the glibc one is tested (SKIPPED: the musl build)" >&2
        echo "the release suite against the musl build" >>"$ledger"
    fi
    make --no-print-directory release CARGO="$CARGO" || status=$?
    if ((status == 0)); then
        echo "release suite: the integration tests against $release" >&2
        AUTOMATIONS_TEST_BIN=$PWD/$release "$CARGO" test --locked --test it || status=$?
    fi
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
    echo "make test: the tests selected by '$*' passed (the release suite runs only without a selection)"
    exit 0
fi
echo "make test: every test ran and passed (none skipped)"
