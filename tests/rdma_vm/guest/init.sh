#!/bin/busybox sh
# Stage 1 of the rdma_vm guest: /init of the initramfs that run-in-guest.sh
# builds. It does all the guest's setup with busybox (static: under TCG one
# exec of a dynamic host binary costs 0.1-2 s, one of busybox ~0.02 s):
#   1. loads the virtio, 9p and overlay modules,
#   2. mounts the io share (tag "vsocketio", a writable host temp dir holding
#      guest.conf, the command and, later, its output and exit status),
#   3. builds the root filesystem: the host's "/" (9p tag "hostroot",
#      read-only) under a tmpfs overlay, so every host binary runs here and
#      nothing the guest writes reaches the host,
#   4. mounts --writable host dirs, binds the kernel's module tree,
#   5. configures eth0, loads rdma_rxe, creates rxe0 and waits until it is
#      ACTIVE with its RoCE v2 IPv4 GID,
#   6. (pair mode) waits for the peer guest,
#   7. switch_root to the overlay and runs guest/stage2.sh, which runs the
#      command.
# A failure is written to io/setup-error (the host prints it) and the guest
# powers off.

/bin/busybox --install -s /bin
export PATH=/bin

NINEP=trans=virtio,version=9p2000.L,msize=262144
ROOT=/newroot

# Progress on the console, stamped with the guest's uptime.
say() {
    read -r up _ </proc/uptime
    echo "rdma_vm init [${up}s]: $*" >&2
}

fail() {
    echo "rdma_vm init: FAILED: $*" >&2
    if [ -n "${IO_MOUNTED:-}" ]; then
        echo "$*" >/io/setup-error
    fi
    sync
    poweroff -f
    sleep 10
}

# Poll COMMAND every 0.1 s for up to SECONDS; fail with MESSAGE.
wait_for() {
    local seconds=$1 message=$2 tries
    shift 2
    tries=$((seconds * 10))
    until "$@" >/dev/null 2>&1; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || fail "$message (waited ${seconds}s)"
        sleep 0.1
    done
}

# insmod every module listed (one file name a line) in FILE, in order.
load_modules() {
    local ko
    while read -r ko; do
        [ -n "$ko" ] || continue
        insmod "/lib/modules/$ko" || fail "insmod $ko"
    done <"$1"
}

# --- 1./2. boot modules and the io share ---------------------------------------
mount_early() {
    mount -t proc proc /proc || fail "mount /proc"
    mount -t sysfs sysfs /sys || fail "mount /sys"
    mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
    load_modules /boot.order
    mkdir -p /io
    mount -t 9p -o "$NINEP" vsocketio /io || fail "mount 9p share vsocketio"
    IO_MOUNTED=1
    echo stage1 >/io/progress
    # KVER MODDIR ROLE PEER_ROLES SELF_IP PEER_IP PREFIX_LEN GROUP_IPS
    # GROUP_INDEX GROUP_ROLES PAIR_WAIT
    . /io/guest.conf || fail "cannot read guest.conf"
}

# --- 3./4. root filesystem ---------------------------------------------------------
mount_root() {
    mkdir -p /hostroot /rw "$ROOT"
    # cache=loose: the host root is read-only here, let the guest cache it.
    mount -t 9p -o "$NINEP,ro,cache=loose" hostroot /hostroot ||
        fail "mount 9p share hostroot"
    mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount tmpfs for the overlay"
    mkdir -p /rw/upper /rw/work
    mount -t overlay overlay -o lowerdir=/hostroot,upperdir=/rw/upper,workdir=/rw/work "$ROOT" ||
        fail "mount overlay root"

    mount -t proc proc "$ROOT/proc" || fail "mount guest /proc"
    mount -t sysfs sysfs "$ROOT/sys" || fail "mount guest /sys"
    mount -t devtmpfs devtmpfs "$ROOT/dev" || fail "mount guest /dev"
    mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"
    mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts "$ROOT/dev/pts" || fail "mount /dev/pts"
    mount -t tmpfs -o mode=1777 tmpfs "$ROOT/dev/shm" || fail "mount /dev/shm"
    mount -t tmpfs -o mode=0755 tmpfs "$ROOT/run" || fail "mount /run"
    # The host's /tmp stays visible (the caller's cwd may be there); writes
    # to it land in the overlay's tmpfs.

    mkdir -p "$ROOT/vsocket-io"
    mount --bind /io "$ROOT/vsocket-io" || fail "bind io share"

    # The kernel's module tree is in the host's cache dir: bind it where
    # modprobe looks, for commands that load more modules.
    [ -d "$ROOT$MODDIR" ] || fail "module tree $MODDIR not visible in the guest"
    mkdir -p "$ROOT/lib/modules/$KVER"
    mount --bind "$ROOT$MODDIR" "$ROOT/lib/modules/$KVER" || fail "bind module tree"

    # --writable host dirs: one 9p share each (tags rw0, rw1, ...).
    i=0
    while IFS= read -r dir; do
        [ -n "$dir" ] || continue
        mkdir -p "$ROOT$dir"
        mount -t 9p -o "$NINEP" "rw$i" "$ROOT$dir" || fail "mount writable share $dir"
        i=$((i + 1))
    done </io/rw-shares
}

# --- 5. network and Soft-RoCE -------------------------------------------------------
setup_network() {
    wait_for 10 "no eth0 in the guest" test -e /sys/class/net/eth0
    ip link set lo up || fail "ip link set lo up"
    ip addr add "$SELF_IP/$PREFIX_LEN" dev eth0 || fail "ip addr add $SELF_IP"
    ip link set eth0 up || fail "ip link set eth0 up"
    hostname "vsocket-$ROLE"
    printf '127.0.0.1 localhost\n' >"$ROOT/etc/hosts"
    # Every guest of the group by name (single mode: this one).
    set -- $GROUP_ROLES
    for ip in $GROUP_IPS; do
        printf '%s vsocket-%s\n' "$ip" "$1" >>"$ROOT/etc/hosts"
        shift
    done
}

rxe_port_active() {
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state
}

# GID index 1 is the RoCE v2 GID of SELF_IP (::ffff:a.b.c.d), not zero.
rxe_ipv4_gid_present() {
    ! grep -q '^0000:0000:0000:0000:0000:0000:0000:0000$' /sys/class/infiniband/rxe0/ports/1/gids/1
}

setup_rxe() {
    load_modules /rdma.order
    # The only dynamic host binary run during setup (busybox has no `rdma`).
    chroot "$ROOT" /usr/bin/rdma link add rxe0 type rxe netdev eth0 ||
        fail "rdma link add rxe0 type rxe netdev eth0"
    wait_for 30 "rxe0 port 1 did not become ACTIVE" rxe_port_active
    wait_for 30 "rxe0 has no IPv4 GID at index 1" rxe_ipv4_gid_present
    wait_for 10 "no /dev/infiniband/uverbs0" test -c "$ROOT/dev/infiniband/uverbs0"
    wait_for 10 "no /dev/infiniband/rdma_cm" test -c "$ROOT/dev/infiniband/rdma_cm"
}

# --- 6. pair/group mode: start every command together ------------------------------------
# Each guest writes ready-<role> into the shared "pairsync" dir and waits for
# the others', so that no command starts while a peer is still booting.
pair_barrier() {
    mkdir -p /pairsync
    mount -t 9p -o "$NINEP" pairsync /pairsync || fail "mount pairsync share"
    echo ready >"/pairsync/ready-$ROLE"
    for peer in $PEER_ROLES; do
        wait_for "$PAIR_WAIT" "peer guest $peer did not come up" test -e "/pairsync/ready-$peer"
    done
    umount /pairsync
}

mount_early
say "modules loaded, io share mounted"
mount_root
say "root filesystem ready"
setup_network
setup_rxe
say "rxe0 up"
echo "rxe0 up" >/io/progress
if [ "$ROLE" != single ]; then
    pair_barrier
    say "peer guest up"
fi

# --- 7. hand over to stage 2 (guest/stage2.sh) ----------------------------------------
umount /io /proc /sys /dev 2>/dev/null
# shellcheck disable=SC2093  # the fail below only runs if exec itself fails
exec switch_root "$ROOT" /bin/busybox sh /vsocket-io/stage2.sh
fail "switch_root failed"
