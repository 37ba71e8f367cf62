#!/bin/busybox sh
# Stage 2 of the rdma_vm guest: PID 1 after switch_root (see guest/init.sh,
# which has already set everything up). It runs the command, as root, in the
# host's cwd, with `ulimit -l unlimited` and the VSOCKET_RDMA_* variables,
# its stdout/stderr going to files in the io share; then it writes the exit
# status there and powers the guest off. Only busybox and shell builtins are
# used here, so the command is the first dynamic program to start.

IO=/vsocket-io
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb

# PID 1 must never exit (that is a kernel panic): always power off.
power_off() {
    /bin/busybox sync
    /bin/busybox poweroff -f
    sleep 10
}

fail() {
    echo "rdma_vm stage2: FAILED: $*" >&2
    echo "$*" >"$IO/setup-error"
    power_off
}

# SELF_IP PEER_IP ROLE GUEST_CWD ...
. "$IO/guest.conf" || fail "cannot read guest.conf"
ulimit -l unlimited || fail "ulimit -l unlimited"
cd "$GUEST_CWD" || fail "cwd $GUEST_CWD is not visible in the guest"

# The host reports the boot time from this file's mtime.
read -r up _ </proc/uptime
echo "$up" >"$IO/ready"
echo "running command" >"$IO/progress"
echo "rdma_vm stage2 [${up}s]: running command" >&2

(
    export VSOCKET_RDMA_GUEST=1 VSOCKET_RDMA_ROLE="$ROLE"
    export VSOCKET_RDMA_SELF_IP="$SELF_IP" VSOCKET_RDMA_PEER_IP="$PEER_IP"
    export VSOCKET_RDMA_GROUP_IPS="$GROUP_IPS" VSOCKET_RDMA_GROUP_INDEX="$GROUP_INDEX"
    export VSOCKET_RDMA_DEV=rxe0 VSOCKET_RDMA_GID_INDEX=1
    . "$IO/env.sh"       # --env NAME=VALUE, as `export 'NAME=VALUE'` lines
    . "$IO/command.sh"   # `exec 'arg0' 'arg1' ...`
) </dev/null >>"$IO/stdout" 2>>"$IO/stderr"
status=$?

# Renamed into place so that the host never reads a half-written file.
echo "$status" >"$IO/status.tmp" && /bin/busybox mv "$IO/status.tmp" "$IO/status"
echo "command exited with status $status" >"$IO/progress"
echo "rdma_vm stage2: command exited with status $status" >&2
power_off
