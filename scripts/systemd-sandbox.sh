#!/bin/sh
# Starts a private systemd user manager for tests (tests/it/systemd.rs uses it): a private mount
# namespace whose /run/systemd is a tmpfs holding the system/ folder systemd insists on and the
# inaccessible/ nodes PID 1 makes at boot (which sandboxing settings mount over hidden paths), a private
# XDG_RUNTIME_DIR, a temporary HOME, and a cgroup of its own. From outside, with the same HOME and
# XDG_RUNTIME_DIR, `systemctl --user` reaches it. Stop it with SIGTERM: the manager stops its
# units, anything left in its cgroup is killed, and the cgroup is removed.
#
# The cgroup matters: a manager takes the cgroup it starts in (less a trailing /init.scope) as the
# root of its app.slice. Started from one cgroup, two managers share one app.slice, and the first
# to stop kills the other's running services (a firing "stopped by SIGTERM", a `systemctl start`
# that fails): tests running side by side were flaky.
#
# Usage: systemd-sandbox.sh HOME XDG_RUNTIME_DIR     (needs root: the mount namespace, the cgroup)
set -eu
home=$1
runtime=$2
mkdir -p "$home" "$runtime"
chmod 700 "$runtime"
mkdir -p /run/systemd

# This shell moves into a new cgroup in every hierarchy that takes it (cgroup v2 alone; or v1
# controllers beside a name=systemd or v2 hierarchy; a v1 cpuset without cpus refuses, and is
# left alone), so the manager it starts is born there.
group=automations-test-$$
moved=""
for h in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [ -f "$h/cgroup.procs" ] || continue
    mkdir "$h/$group"
    if echo $$ 2>/dev/null >"$h/$group/cgroup.procs"; then
        moved="$moved $h"
    else
        rmdir "$h/$group"
    fi
done
if [ -z "$moved" ]; then
    echo "systemd-sandbox: no cgroup hierarchy under /sys/fs/cgroup takes a new group" >&2
    exit 1
fi

unshare -m --propagation private sh -c '
    mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system &&
    mkdir -m 0000 -p /run/systemd/inaccessible/dir && touch /run/systemd/inaccessible/reg &&
    chmod 0000 /run/systemd/inaccessible/reg && mkfifo -m 0000 /run/systemd/inaccessible/fifo &&
    mknod -m 0000 /run/systemd/inaccessible/chr c 0 0 && mknod -m 0000 /run/systemd/inaccessible/blk b 0 0 &&
    exec env -i HOME="$1" XDG_RUNTIME_DIR="$2" USER="$(id -un)" LOGNAME="$(id -un)" \
        PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 /lib/systemd/systemd --user
' sh "$home" "$runtime" &
manager=$!
trap 'kill -TERM "$manager" 2>/dev/null || true' TERM INT HUP
# `wait` returns early when a trapped signal arrives; wait again until the manager is gone.
while kill -0 "$manager" 2>/dev/null; do
    wait "$manager" || true
done

# Out of the group, kill what is left in it, remove it (innermost first).
for h in $moved; do
    echo $$ >"$h/cgroup.procs"
    find "$h/$group" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
done
for h in $moved; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        find "$h/$group" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [ -d "$h/$group" ] || break
        sleep 0.1
    done
done
