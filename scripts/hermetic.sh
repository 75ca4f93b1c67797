#!/usr/bin/env bash
# `cargo test` as a person who has nothing but Rust would run it: as an ordinary user, with a HOME
# of their own, on a machine without any of the packages `make test` installs. Run as root: it
# makes that user (automations-hermetic) when missing, hides every file of those packages in a
# private mount namespace (each executable covered by /dev/null, so it is there but will not
# run), and runs `cargo test --release --locked` there as that user, in this checkout.
#
# The tests that need a real component are #[ignore]d and say which: this shows none of the rest
# needs one. The checkout (and its target/, which `make test` goes on using) is handed to that
# user for the run and given back afterwards.
#
# Usage: scripts/hermetic.sh [cargo test arguments…]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "hermetic: run as root (it makes a user and a mount namespace)" >&2; exit 3; }
user=automations-hermetic
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
home=$(getent passwd "$user" | cut -d: -f6)
uid=$(id -u "$user")
gid=$(id -g "$user")

# The toolchain this root uses, readable to that user (rustup's own folders are world-readable;
# the home folder above them need only be passable).
cargo_bin=$(dirname "$(command -v cargo)")
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
for d in "$HOME" "$(dirname "$cargo_bin")"; do chmod o+x "$d"; done
# Its own CARGO_HOME, seeded with the crates this one already fetched (no second download).
mkdir -p "$home/.cargo"
if [[ -d ${CARGO_HOME:-$HOME/.cargo}/registry && ! -d $home/.cargo/registry ]]; then
    cp -a "${CARGO_HOME:-$HOME/.cargo}/registry" "$home/.cargo/"
fi
chown -R "$uid:$gid" "$home"

# Every executable of the test prerequisites (scripts/test-prereqs.sh --list), and python3's.
hidden=$(mktemp)
owner=$(stat -c %u:%g .)
trap 'rm -f "$hidden"; chown -R "$owner" .' EXIT
for pkg in $(scripts/test-prereqs.sh --list) python3-minimal python3.11-minimal; do
    case $pkg in util-linux | libc6-dev) continue ;; esac
    { dpkg -L "$pkg" 2>/dev/null || true; } | while read -r f; do
        if [[ -f $f && -x $f && ! -L $f ]]; then echo "$f"; fi
    done
done >"$hidden"
# Programs of theirs installed from elsewhere (kubectl from Google's package, python3 from pyenv).
for p in kubectl promtool python3 curl; do
    command -v "$p" >/dev/null 2>&1 && realpath "$(command -v "$p")" >>"$hidden"
done
sort -u -o "$hidden" "$hidden"
echo "hermetic: $(wc -l <"$hidden") programs of the test prerequisites hidden; cargo test as $user"

chown -R "$uid:$gid" .
UID_=$uid GID_=$gid HOME_=$home USER_=$user CARGO_BIN=$cargo_bin RUSTUP_HOME_=$rustup_home \
    unshare -m --propagation private bash -c '
    while read -r f; do mount --bind /dev/null "$f"; done <"$1"
    shift
    exec setpriv --reuid="$UID_" --regid="$GID_" --init-groups env -i HOME="$HOME_" USER="$USER_" \
        LOGNAME="$USER_" LANG=C.UTF-8 PATH="$CARGO_BIN:/usr/local/bin:/usr/bin:/bin" \
        CARGO_HOME="$HOME_/.cargo" RUSTUP_HOME="$RUSTUP_HOME_" CI="${CI:-}" \
        cargo test --release --locked "$@"
' hermetic "$hidden" "$@"
