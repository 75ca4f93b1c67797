#!/usr/bin/env bash
# `make dist`: the release artifacts, into target/dist/ (docs/install.md says what each holds):
#
#   automations-<version>-<target>.tar.gz   the binary, its manual pages, completions for bash, zsh
#                                           and fish, README.md and LICENSE
#   automations_<version>-1_<arch>.deb      the same, where Debian keeps them (cargo-deb)
#   SHA256SUMS                              of both
#   image/                                  what the container image holds (Containerfile)
#
# The binary is the release build decided here and nowhere else: statically linked against musl,
# with mimalloc as the allocator of the whole process, in the `dist` profile (stripped). The
# default build stays cargo's plain one.
#
# Usage: scripts/dist.sh [TARGET]     (default x86_64-unknown-linux-musl)
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
target=${1:-x86_64-unknown-linux-musl}

need() { command -v "$1" >/dev/null || { echo "dist: $1 is missing ($2)" >&2; exit 3; }; }
need musl-gcc "apt-get install musl-tools"
"$CARGO" deb --version >/dev/null 2>&1 || { echo "dist: cargo-deb is missing (cargo install cargo-deb --locked)" >&2; exit 3; }
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$target"; then
    rustup target add "$target"
fi

version=$("$CARGO" metadata --no-deps --format-version 1 | sed -n 's/.*"name":"automations","version":"\([^"]*\)".*/\1/p')
[[ -n $version ]] || { echo "dist: cannot read the version from Cargo.toml" >&2; exit 3; }
"$CARGO" build --locked --profile dist --target "$target" --features mimalloc --quiet
bin=target/$target/dist/automations

out=target/dist
stage=$out/stage
rm -rf "$out"
mkdir -p "$stage/man" "$stage/completions"
"$bin" man --out "$stage/man"
"$bin" completions bash >"$stage/completions/automations.bash"
"$bin" completions zsh >"$stage/completions/_automations"
"$bin" completions fish >"$stage/completions/automations.fish"

# The tarball: one folder named like it, files owned by nobody in particular, stamped with the
# last commit's time, so the same tree gives the same bytes.
name=automations-$version-$target
mkdir -p "$out/$name"
cp "$bin" README.md LICENSE "$out/$name/"
cp -R "$stage/man" "$stage/completions" "$out/$name/"
stamp=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --mtime="@$stamp" --owner=0 --group=0 --numeric-owner -C "$out" -cf - "$name" |
    gzip -n >"$out/$name.tar.gz"
rm -rf "$out/$name"

# The .deb: cargo-deb's assets name target/release/automations, which --target and --profile
# make the binary above (Cargo.toml, [package.metadata.deb]); the other assets are the pages and
# completions staged above (cargo-deb says, for each, that it will not build it: it is not meant
# to). A changelog for this version, and lintian's one warning a static-pie binary earns: it looks
# like a shared library to lintian (an ELF shared object without an interpreter).
date=$(date -u -R -d "@$stamp")
maintainer=$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml)
printf 'automations (%s-1) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' \
    "$version" "$version" "$maintainer" "$date" >"$stage/changelog"
echo "automations: shared-library-lacks-prerequisites [usr/bin/automations]" >"$stage/lintian-overrides"
"$CARGO" deb --no-build --target "$target" --profile dist --output "$out" 2>&1 >/dev/null |
    { grep -v "does not match the pattern, and will not be built" || true; } >&2

(cd "$out" && sha256sum -- *.tar.gz *.deb >SHA256SUMS)

# What the container image holds (the Containerfile copies it whole): the binary, the
# definitions, and only the scripts they run.
image=$out/image
mkdir -p "$image/usr/local/bin" "$image/app/automations" "$image/app/scripts"
cp "$bin" "$image/usr/local/bin/automations"
cp automations/*.toml "$image/app/automations/"
"$bin" --root . list --json | sed -n 's/^ *"script": "\(.*\)",\{0,1\}$/\1/p' | while read -r script; do
    mkdir -p "$image/app/$(dirname "$script")"
    cp -p "$script" "$image/app/$script"
done

echo "dist: target/dist/$name.tar.gz, the .deb and SHA256SUMS ($(du -h "$bin" | cut -f1) binary)"
