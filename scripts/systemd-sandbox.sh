#!/bin/sh
# Starts a private systemd user manager for tests, in the foreground (tests/it/systemd.rs uses it):
# a private mount namespace whose /run/systemd is a tmpfs holding the system/ folder systemd
# insists on, a private XDG_RUNTIME_DIR and a temporary HOME. From outside, with the same HOME and
# XDG_RUNTIME_DIR, `systemctl --user` reaches it. Stop it with SIGTERM.
#
# Usage: systemd-sandbox.sh HOME XDG_RUNTIME_DIR     (needs root for the mount namespace)
set -eu
home=$1
runtime=$2
mkdir -p "$home" "$runtime"
chmod 700 "$runtime"
mkdir -p /run/systemd
exec unshare -m --propagation private sh -c '
    mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system &&
    exec env -i HOME="$1" XDG_RUNTIME_DIR="$2" USER="$(id -un)" LOGNAME="$(id -un)" \
        PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 /lib/systemd/systemd --user
' sh "$home" "$runtime"
