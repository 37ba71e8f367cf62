#!/bin/busybox sh
# Stage 1 of the rdma_vm guest: the /init of the initramfs built by
# run-in-guest.sh. It runs under busybox (the only program in the initramfs),
# loads the modules needed to reach the host's filesystem, builds the guest's
# root filesystem and hands over to stage 2 (guest/stage2.sh) with switch_root.
#
# Root filesystem = overlay of
#   lower: the host's "/" shared read-only over virtio-9p (tag "hostroot"),
#   upper: a tmpfs, so the guest can write anywhere without touching the host.
# The writable 9p share "vsocketio" (a host temp dir) carries the command,
# its configuration, its output and its exit status between host and guest.

/bin/busybox --install -s /bin
export PATH=/bin

# Where a failure in this stage is reported: the console always, and the
# io share once it is mounted (the host prints it as the reason).
fail() {
    echo "rdma_vm init: FAILED: $*" >&2
    if [ -d /io/. ] && mountpoint -q /io; then
        echo "stage1: $*" >/io/setup-error
        sync
    fi
    poweroff -f
    sleep 5
    exit 1
}

mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"

# Boot modules, in dependency order (computed on the host by modprobe
# --show-depends and written to /modules.order, one .ko file name a line).
while read -r ko; do
    [ -n "$ko" ] || continue
    insmod "/lib/modules/$ko" || fail "insmod $ko"
done </modules.order

NINEP_OPTS=trans=virtio,version=9p2000.L,msize=262144

# The io share first, so that later failures can be reported to the host.
mkdir -p /io
mount -t 9p -o "$NINEP_OPTS" vsocketio /io || fail "mount 9p share vsocketio"
echo stage1 >/io/progress

# The host's root, read-only, plus a tmpfs upper layer.
mkdir -p /hostroot /rw /newroot
mount -t 9p -o "$NINEP_OPTS,ro" hostroot /hostroot || fail "mount 9p share hostroot"
mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount tmpfs for overlay"
mkdir -p /rw/upper /rw/work
mount -t overlay overlay \
    -o lowerdir=/hostroot,upperdir=/rw/upper,workdir=/rw/work /newroot ||
    fail "mount overlay root"

# Keep the io share reachable after switch_root.
mkdir -p /newroot/vsocket-io
mount --move /io /newroot/vsocket-io || fail "move io share"

# switch_root wants only the new root mounted below it; stage 2 remounts
# proc, sys and dev itself.
umount /proc /sys /dev 2>/dev/null

[ -x /newroot/bin/bash ] || fail "host has no /bin/bash"
exec switch_root /newroot /bin/bash /vsocket-io/stage2.sh
fail "switch_root failed"
