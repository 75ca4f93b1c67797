#!/usr/bin/env bash
# make check-macos: `cargo clippy --all-targets -D warnings` for both Apple targets, on Linux.
#
# Nothing built here links or runs (there is no Apple SDK); it proves the crate and its tests
# compile and lint for macOS, so a macOS-only error breaks CI instead of a user's install. The one C
# dependency on the way (ring, through rustls) is compiled by Debian's clang in freestanding mode
# against three stand-in headers this script writes under target/ (docs/macos.md says what that
# does and does not prove).
#
# Sets up what it needs: the rustup targets, and clang (installed with apt-get when root; otherwise
# it prints the command and exits 3).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
TARGETS=(aarch64-apple-darwin x86_64-apple-darwin)

if ! command -v clang >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "check-macos: installing clang (apt-get install -y clang)" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang; } >&2
    else
        echo "check-macos: clang is missing; install it with: sudo apt-get install -y clang" >&2
        exit 3
    fi
fi
command -v rustup >/dev/null 2>&1 || { echo "check-macos: rustup is missing; the Apple targets are added with it" >&2; exit 3; }
installed=$(rustup target list --installed)
for t in "${TARGETS[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# The stand-in headers: only what ring's C includes, for a compile that is never linked.
inc=target/macos-check/include
mkdir -p "$inc"
cat >"$inc/TargetConditionals.h" <<'H'
/* Stand-in for Apple's header: enough for a compile-only check on Linux. */
#pragma once
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#define TARGET_OS_IOS 0
#define TARGET_OS_WATCH 0
#define TARGET_OS_TV 0
#define TARGET_OS_SIMULATOR 0
#define TARGET_OS_EMBEDDED 0
H
cat >"$inc/assert.h" <<'H'
/* Stand-in: assertions compile away; static_assert is C11's. */
#pragma once
#define assert(x) ((void)0)
#define static_assert _Static_assert
H
cat >"$inc/string.h" <<'H'
/* Stand-in: the declarations ring's C uses. */
#pragma once
#include <stddef.h>
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
H

clang_inc="$(clang -print-resource-dir)/include"
# Both targets in one cargo run: one target's last crates compile while the other's dependencies
# do (109 s here, against 114 s for two runs that linted the second target's program only).
vars=()
targets=()
for t in "${TARGETS[@]}"; do
    var=${t//-/_}
    vars+=("CC_$var=clang" "CFLAGS_$var=-nostdinc -isystem $clang_inc -I$PWD/$inc -ffreestanding")
    targets+=(--target "$t")
done
echo "check-macos: cargo clippy --all-targets ${targets[*]}" >&2
env "${vars[@]}" "$CARGO" clippy --locked --profile test-build --all-targets "${targets[@]}" -- -D warnings
echo "check-macos: both Apple targets compile and lint clean"
