#!/usr/bin/env bash
# Run a command inside a QEMU guest that has a working Soft-RoCE (rdma_rxe)
# device, with the host's filesystem visible, and return its output and exit
# status. See README.md in this directory for the design and figures.
#
#   run-in-guest.sh [OPTIONS] -- COMMAND [ARG...]
#   run-in-guest.sh [OPTIONS] --pair 'SHELL CMD A' 'SHELL CMD B'
#   run-in-guest.sh [OPTIONS] --group 'SHELL CMD A' 'SHELL CMD B' 'SHELL CMD C' ...
#   run-in-guest.sh --prepare
#
# Exit status: the command's own status; 124 if the guest hit the deadline;
# 125 if the harness or the guest setup failed (message on stderr).

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GUEST_DIR=$SCRIPT_DIR/guest

# --- settings (options and environment) ---------------------------------------
CACHE_DIR=${VSOCKET_RDMA_VM_CACHE:-/var/cache/vsocket-rdma-vm}
KERNEL_OVERRIDE=${VSOCKET_RDMA_KERNEL:-}   # e.g. 6.1.0-57-amd64
TIMEOUT=300                                # whole run: boot + command
MEM_MB=2048
SMP=                                       # default: 2 (single), 1 (pair)
MODE=single                                # single | pair (2+ guests) | prepare
VERBOSE=0
QUIET=0
CONSOLE_LOG=
RW_SHARES=()
EXTRA_ENV=()
CMD=()
GROUP_OPTION=

# Debian packages the harness (and the RDMA tools run in the guest) need.
# The guest runs the host's binaries, so they are installed on the host.
PACKAGES=(qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 rdma-core
          ibverbs-providers ibverbs-utils rdmacm-utils perftest
          libibverbs-dev librdmacm-dev)

# Modules the initramfs loads (with their dependencies) to reach the host root.
BOOT_MODULES=(virtio_pci virtio_net 9pnet_virtio 9p overlay)
# Soft-RoCE and the user-space verbs/RDMA-CM interfaces, loaded by init too.
# crc32_generic: rxe asks the kernel for "crc32" when it creates a device, and
# in the initramfs there is no modprobe for the kernel to call. (Under TCG
# crc32_pclmul measured no faster.)
RDMA_MODULES=(crc32_generic rdma_rxe ib_uverbs rdma_ucm)

# Guest addresses: single mode talks to itself; pair mode a <-> b; a group
# of N guests a, b, c, ... gets 10.0.2.15, .16, .17, ...
IP_A=10.0.2.15
GROUP_ROLES=(a b c d)
MAX_GROUP=${#GROUP_ROLES[@]}
PREFIX_LEN=24

EXIT_TIMEOUT=124
EXIT_HARNESS=125

usage() {
    cat <<'EOF'
usage: run-in-guest.sh [OPTIONS] -- COMMAND [ARG...]
       run-in-guest.sh [OPTIONS] --pair 'SHELL COMMAND A' 'SHELL COMMAND B'
       run-in-guest.sh [OPTIONS] --group 'SHELL COMMAND A' 'B' 'C' ...
       run-in-guest.sh --prepare

Boots a QEMU guest (Debian's kernel, rdma_rxe Soft-RoCE device rxe0 on eth0,
host "/" visible read-only with a tmpfs overlay) and runs COMMAND in it as
root, in the host's current directory, with `ulimit -l unlimited` and
VSOCKET_RDMA_GUEST=1. The command's stdout/stderr go to this stdout/stderr and
its exit status is returned.

options:
  --timeout S        kill the guest after S seconds, boot included (default 300)
  --pair             two guests (a: 10.0.2.15, b: 10.0.2.16) joined by an
                     emulated link; runs 'A' in guest a and 'B' in guest b (each
                     with bash -c), both started once both guests are up;
                     output lines are prefixed with [a] / [b]
  --group            two to four guests (a, b, c, d: 10.0.2.15, .16, .17, .18),
                     as --pair, one shell command each; three or more share one
                     emulated segment (tests/rdma_vm/udp_hub.py)
  --writable DIR     make host DIR writable in the guest (repeatable); anything
                     else the guest writes is discarded at poweroff
  --env NAME=VALUE   extra environment variable for the command (repeatable)
  --smp N            vCPUs per guest (default 2; 1 in --pair mode)
  --mem MB           guest memory (default 2048)
  --console-log FILE keep the guest's console log (pair: FILE.a, FILE.b, ...)
  -v, --verbose      also stream the guest console to stderr
  -q, --quiet        no harness progress messages
  --prepare          only install packages and fetch the kernel, then exit
  -h, --help         this text

environment: VSOCKET_RDMA_VM_CACHE (kernel cache dir, default
/var/cache/vsocket-rdma-vm), VSOCKET_RDMA_KERNEL (kernel ABI to use, e.g.
6.1.0-57-amd64; default: the cached one, else the one linux-image-amd64 names).

In the guest: VSOCKET_RDMA_GUEST=1, VSOCKET_RDMA_ROLE (single|a|b|c|d),
VSOCKET_RDMA_SELF_IP, VSOCKET_RDMA_PEER_IP (the next guest, a after the
last; self in single mode), VSOCKET_RDMA_GROUP_IPS (every guest's address,
in order) and VSOCKET_RDMA_GROUP_INDEX (this guest's place in it, from 0),
VSOCKET_RDMA_DEV=rxe0, VSOCKET_RDMA_GID_INDEX=1 (RoCE v2 IPv4 GID: perftest
-x 1, ibv_* -g 1).

exit status: the command's; 124 guest deadline hit; 125 harness/setup failure.
EOF
}

log() {
    ((QUIET)) || echo "rdma_vm: $*" >&2
}

die() {
    echo "rdma_vm: error: $*" >&2
    exit "$EXIT_HARNESS"
}

# --- argument parsing -------------------------------------------------------------
add_writable() {
    local dir
    if ! dir=$(realpath -e "$1" 2>/dev/null) || [[ ! -d $dir ]]; then
        die "--writable: no such directory: $1"
    fi
    [[ $dir != *,* ]] || die "--writable: QEMU cannot share a path with a comma: $dir"
    [[ $dir != *$'\n'* ]] || die "--writable: path with a newline: $dir"
    [[ $dir != / ]] || die "--writable: refusing to make / writable"
    RW_SHARES+=("$dir")
}

parse_args() {
    while (($#)); do
        case $1 in
        --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
        --pair) MODE=pair; GROUP_OPTION=--pair; shift ;;
        --group) MODE=pair; GROUP_OPTION=--group; shift ;;
        --writable) add_writable "${2:?--writable needs a directory}"; shift 2 ;;
        --env) [[ ${2:-} == [A-Za-z_]*=* ]] || die "--env wants NAME=VALUE"
               EXTRA_ENV+=("$2"); shift 2 ;;
        --smp) SMP=${2:?--smp needs a value}; shift 2 ;;
        --mem) MEM_MB=${2:?--mem needs a value}; shift 2 ;;
        --console-log) CONSOLE_LOG=${2:?--console-log needs a file}; shift 2 ;;
        -v|--verbose) VERBOSE=1; shift ;;
        -q|--quiet) QUIET=1; shift ;;
        --prepare) MODE=prepare; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) usage >&2; die "unknown option: $1" ;;
        *) break ;;
        esac
    done
    CMD=("$@")

    [[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a positive integer"
    [[ $MEM_MB =~ ^[0-9]+$ ]] || die "--mem wants megabytes"
    case $MODE in
    single) ((${#CMD[@]} >= 1)) || { usage >&2; die "no command given"; } ;;
    pair)
        if [[ $GROUP_OPTION == --pair ]]; then
            ((${#CMD[@]} == 2)) || { usage >&2; die "--pair wants exactly two shell commands"; }
        else
            ((${#CMD[@]} >= 2 && ${#CMD[@]} <= MAX_GROUP)) ||
                { usage >&2; die "--group wants 2 to $MAX_GROUP shell commands"; }
        fi ;;
    esac
    if [[ -z $SMP ]]; then
        if [[ $MODE == pair ]]; then SMP=1; else SMP=2; fi
    fi
    [[ $SMP =~ ^[0-9]+$ ]] || die "--smp wants a number"
}

# --- host preparation ---------------------------------------------------------------
# Install the Debian packages that are missing (idempotent: dpkg is asked first).
ensure_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
            missing+=("$p")
        fi
    done
    ((${#missing[@]})) || return 0
    ((EUID == 0)) || die "missing packages (${missing[*]}) and not root to install them"
    log "installing ${missing[*]}"
    local aptlog
    aptlog=$(mktemp /tmp/rdma_vm-apt.XXXXXX)
    # A stale package list is the usual reason for a failed install: update once, retry.
    if ! apt_install "${missing[@]}" >"$aptlog" 2>&1; then
        timeout 300 apt-get update -q >>"$aptlog" 2>&1 || true
        apt_install "${missing[@]}" >>"$aptlog" 2>&1 || {
            tail -n 20 "$aptlog" >&2
            rm -f "$aptlog"
            die "apt-get install failed"
        }
    fi
    rm -f "$aptlog"
}

apt_install() {
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q \
        -o DPkg::Lock::Timeout=300 --no-install-recommends "$@"
}

# Make sure an unpacked Debian kernel with rdma_rxe is in the cache; sets
# KVER (e.g. 6.1.0-57-amd64) and KROOT (the unpacked package root).
ensure_kernel() {
    mkdir -p "$CACHE_DIR"
    # One preparer at a time (concurrent runs share the cache).
    local lockfd
    exec {lockfd}>"$CACHE_DIR/.lock"
    flock -w 900 "$lockfd" || die "timed out waiting for the lock on $CACHE_DIR"

    KVER=$KERNEL_OVERRIDE
    if [[ -z $KVER ]]; then
        # Prefer the newest complete cached kernel: no network, no surprise upgrades.
        KVER=$(find "$CACHE_DIR" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null |
            xargs -r -n1 basename | sort -V | tail -n 1)
    fi
    if [[ -z $KVER ]]; then
        # The kernel ABI that Debian's linux-image-amd64 currently depends on.
        KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
            sed -n '/^ *Depends: linux-image-[0-9].*-amd64$/{s/^ *Depends: linux-image-//p;q}')
        [[ -n $KVER ]] || die "cannot find Debian's kernel package (apt-cache depends linux-image-amd64); run apt-get update"
    fi
    KROOT=$CACHE_DIR/$KVER
    if [[ ! -e $KROOT/.complete ]]; then
        fetch_and_unpack_kernel
    fi
    exec {lockfd}>&-
    [[ -f $KROOT/boot/vmlinuz-$KVER ]] || die "no kernel image in $KROOT"
}

fetch_and_unpack_kernel() {
    local pkg=linux-image-$KVER deb tmp debs
    # The .deb goes where apt keeps what it downloads, so a download cache
    # kept for that directory (scripts/test-in-fresh-root.sh) serves it too;
    # apt-get download checks the hash of a file already there and fetches
    # it again only if it does not match the package list.
    eval "$(apt-config shell debs Dir::Cache::archives/d)"
    [[ -n $debs ]] || debs=/var/cache/apt/archives/
    mkdir -p "$debs"
    log "fetching $pkg into $debs, unpacking into $CACHE_DIR (once)"
    (cd "$debs" && timeout 600 apt-get download -q "$pkg" >/dev/null 2>"$CACHE_DIR/download.log") || {
        cat "$CACHE_DIR/download.log" >&2
        die "apt-get download $pkg failed (try apt-get update)"
    }
    deb=$(ls -t "$debs/${pkg}"_*.deb | head -n 1)
    tmp=$KROOT.partial
    rm -rf "$tmp" "$KROOT"
    dpkg -x "$deb" "$tmp" || die "dpkg -x $deb failed"
    # The package ships without modules.dep; modprobe needs it.
    depmod -b "$tmp" "$KVER" || die "depmod failed for $KVER"
    modprobe -d "$tmp" -S "$KVER" --show-depends rdma_rxe >/dev/null ||
        die "kernel $KVER has no rdma_rxe module"
    extract_vmlinux "$tmp/boot/vmlinuz-$KVER" "$tmp/boot/vmlinux-$KVER" ||
        log "could not decompress vmlinuz; booting the bzImage (slower)"
    mv "$tmp" "$KROOT"
    touch "$KROOT/.complete"
    rm -f "$CACHE_DIR/download.log"
}

# Decompress Debian's xz-compressed bzImage into the plain ELF vmlinux. QEMU
# boots that directly (PVH entry point, CONFIG_PVH=y), which skips the
# firmware's real-mode setup and the in-guest xz decompression: about 6 s
# less per boot under TCG.
extract_vmlinux() {
    local bz=$1 out=$2 offset
    offset=$(LC_ALL=C grep -obUa $'\xfd7zXZ' "$bz" | head -n 1 | cut -d: -f1)
    [[ -n $offset ]] || return 1
    tail -c +$((offset + 1)) "$bz" | xz -dc --single-stream >"$out.tmp" 2>/dev/null || true
    if [[ $(head -c 4 "$out.tmp" 2>/dev/null) == $'\x7fELF' ]]; then
        mv "$out.tmp" "$out"
    else
        rm -f "$out.tmp"
        return 1
    fi
}

# --- initramfs --------------------------------------------------------------------
# busybox-static + the boot modules + guest/init.sh as /init.
build_initramfs() {
    local out=$1 dir=$2
    mkdir -p "$dir"/{bin,dev,proc,sys,lib/modules}
    cp /bin/busybox "$dir/bin/busybox"
    cp "$GUEST_DIR/init.sh" "$dir/init"
    chmod 0755 "$dir/init" "$dir/bin/busybox"
    mknod -m 600 "$dir/dev/console" c 5 1
    add_modules "$dir" boot.order "${BOOT_MODULES[@]}"
    add_modules "$dir" rdma.order "${RDMA_MODULES[@]}"
    (cd "$dir" && find . -print0 | cpio --null -o -H newc --quiet) >"$out"
}

# Copy MODULES and their dependencies into the initramfs DIR, and list them,
# in the order modprobe would load them, in DIR/ORDER_FILE (for insmod).
# Modules already listed in an earlier order file are skipped.
add_modules() {
    local dir=$1 order=$2 ko name files
    shift 2
    : >"$dir/$order"
    files=$(for name in "$@"; do
                modprobe -d "$KROOT" -S "$KVER" --show-depends "$name" || exit 1
            done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }') ||
        die "modules $* not all found in kernel $KVER"
    for ko in $files; do
        name=$(basename "$ko")
        name=${name%.xz}
        name=${name%.zst}
        [[ -e $dir/lib/modules/$name ]] && continue
        case $ko in
        *.ko) cp "$ko" "$dir/lib/modules/$name" ;;
        *.ko.xz) xz -dc "$ko" >"$dir/lib/modules/$name" ;;
        *.ko.zst) zstd -qdc "$ko" >"$dir/lib/modules/$name" ;;
        *) die "unexpected module file $ko" ;;
        esac
        echo "$name" >>"$dir/$order"
    done
}

# --- per-guest io directory ------------------------------------------------------------
# Single-quote a string for POSIX sh (the guest side runs under busybox sh).
sh_quote() {
    local s=$1 q="'"
    printf "'%s'" "${s//$q/$q\\$q$q}"
}

# Fill the writable 9p share of one guest: stage2.sh; guest.conf (settings);
# command.sh (`exec 'arg0' ...`); env.sh (--env); rw-shares (--writable
# dirs, one a line); empty stdout/stderr for the streams to follow.
# Guest INDEX of the global ROLES/IPS (single mode: one of each).
# Args: IO_DIR INDEX COMMAND...
write_guest_io() {
    local io=$1 index=$2 arg kv i peers=""
    shift 2
    local role=${ROLES[$index]} n=${#ROLES[@]}
    for i in "${!ROLES[@]}"; do
        ((i == index)) || peers+="${peers:+ }${ROLES[$i]}"
    done
    mkdir -p "$io"
    cp "$GUEST_DIR/stage2.sh" "$io/stage2.sh"
    : >"$io/stdout"
    : >"$io/stderr"
    {
        echo "# written by run-in-guest.sh"
        echo "KVER=$(sh_quote "$KVER")"
        echo "MODDIR=$(sh_quote "$KROOT/lib/modules/$KVER")"
        echo "ROLE=$role PEER_ROLES='$peers'"
        echo "SELF_IP=${IPS[$index]} PEER_IP=${IPS[$(((index + 1) % n))]} PREFIX_LEN=$PREFIX_LEN"
        echo "GROUP_IPS='${IPS[*]}' GROUP_INDEX=$index GROUP_ROLES='${ROLES[*]}'"
        echo "GUEST_CWD=$(sh_quote "$PWD")"
        echo "PAIR_WAIT=$TIMEOUT"
    } >"$io/guest.conf"
    {
        printf 'exec'
        for arg in "$@"; do
            printf ' %s' "$(sh_quote "$arg")"
        done
        echo
    } >"$io/command.sh"
    : >"$io/env.sh"
    for kv in "${EXTRA_ENV[@]}"; do
        echo "export $(sh_quote "$kv")" >>"$io/env.sh"
    done
    : >"$io/rw-shares"
    if ((${#RW_SHARES[@]})); then
        printf '%s\n' "${RW_SHARES[@]}" >"$io/rw-shares"
    fi
}

# --- QEMU ------------------------------------------------------------------------------
# Fills the global array QEMU_ARGS for one guest:
#  - TCG, multi-threaded: there is no usable KVM (a /dev/kvm may exist in this
#    sandbox, but guests hang on it); one host thread per vCPU, and 2 vCPUs so
#    that an RDMA client and server can both busy-poll at once.
#  - the plain vmlinux when extracted (PVH direct boot), else the bzImage;
#    panic=-1 with -no-reboot: a guest panic ends QEMU at once.
#  - console on ttyS0 into a file (shown on failure, or live with -v).
#  - 9p shares: host "/" read-only (hostroot), the io dir (vsocketio),
#    --writable dirs (rw0...), the pair barrier dir (pairsync).
#  - one virtio NIC: user-mode networking with restrict=on (no way out of
#    the guest) or, in pair mode, a UDP socket link to the other guest.
# Args: ROLE IO_DIR CONSOLE_FILE NETDEV_SPEC MAC
qemu_args_for() {
    local role=$1 io=$2 console=$3 netdev=$4 mac=$5 i
    local kernel=$KROOT/boot/vmlinux-$KVER append
    [[ -f $kernel ]] || kernel=$KROOT/boot/vmlinuz-$KVER
    append="console=ttyS0 panic=-1 mitigations=off"
    ((VERBOSE)) || append+=" quiet"
    # shellcheck disable=SC2054  # the commas belong to QEMU's option syntax
    QEMU_ARGS=(
        -name "vsocket-rdma-$role"
        -nodefaults -no-user-config -display none -no-reboot
        -accel tcg,thread=multi -cpu max -smp "$SMP" -m "$MEM_MB"
        -kernel "$kernel" -initrd "$INITRD" -append "$append"
        -serial "file:$console"
        -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
        -virtfs "local,path=$io,mount_tag=vsocketio,security_model=none"
        -netdev "$netdev" -device "virtio-net-pci,netdev=n0,romfile=,mac=$mac"
    )
    for i in "${!RW_SHARES[@]}"; do
        QEMU_ARGS+=(-virtfs "local,path=${RW_SHARES[$i]},mount_tag=rw$i,security_model=none,multidevs=remap")
    done
    if [[ $MODE == pair ]]; then
        QEMU_ARGS+=(-virtfs "local,path=$RUN_DIR/pairsync,mount_tag=pairsync,security_model=none")
    fi
}

# Start one guest in the background under `timeout`; records its pid.
# Args: ROLE IO_DIR CONSOLE_FILE NETDEV_SPEC MAC
start_guest() {
    local role=$1
    qemu_args_for "$@"
    timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 "${QEMU_ARGS[@]}" \
        </dev/null >"$RUN_DIR/qemu-$role.log" 2>&1 &
    GUEST_PIDS[$role]=$!
}

# Copy a guest file to our stdout/stderr as it grows, until the guest is gone.
# Args: PID FILE PREFIX(empty: none)
stream() {
    local pid=$1 file=$2 prefix=$3
    if [[ -z $prefix ]]; then
        tail -n +1 -s 0.2 --pid="$pid" -f "$file"
    else
        tail -n +1 -s 0.2 --pid="$pid" -f "$file" | sed -u "s/^/$prefix/"
    fi
}

# Pair mode: stop the guests that are not ROLE, if they still run.
stop_other_guests() {
    local role=$1 other
    for other in "${ROLES[@]}"; do
        [[ $other == "$role" ]] && continue
        if kill -0 "${GUEST_PIDS[$other]}" 2>/dev/null; then
            log "guest $role ended without an exit status; stopping guest $other"
            kill -TERM "${GUEST_PIDS[$other]}" 2>/dev/null || true
        fi
    done
}

# COUNT consecutive free UDP ports on 127.0.0.1 from PORT_BASE: one per
# guest's link end, and the hub's after them for three guests or more.
pick_udp_ports() {
    local count=$1 base tries=0 i busy
    while ((tries++ < 50)); do
        base=$(shuf -i 20000-60000 -n 1)
        busy=0
        for ((i = 0; i < count; i++)); do
            if ss -Hlun "sport = :$((base + i))" 2>/dev/null | grep -q .; then busy=1; break; fi
        done
        if ((busy == 0)); then
            PORT_BASE=$base
            return 0
        fi
    done
    die "no $count free UDP ports found"
}

# Interpret how one guest ended; prints the reason on stderr; echoes the status.
# Args: ROLE QEMU_STATUS
guest_result() {
    local role=$1 qemu_status=$2
    local io=$RUN_DIR/io-$role tag=""
    [[ $MODE == pair ]] && tag=" [$role]"
    if [[ -s $io/status ]]; then
        cat "$io/status"
        return
    fi
    if [[ -s $io/setup-error ]]; then
        echo "rdma_vm: error:$tag guest setup failed: $(cat "$io/setup-error")" >&2
        echo "$EXIT_HARNESS"
    elif ((qemu_status == 124 || qemu_status == 137)); then
        echo "rdma_vm: error:$tag guest killed at the ${TIMEOUT}s deadline (last step: $(cat "$io/progress" 2>/dev/null || echo boot))" >&2
        echo "$EXIT_TIMEOUT"
    else
        echo "rdma_vm: error:$tag guest stopped without an exit status (qemu status $qemu_status, last step: $(cat "$io/progress" 2>/dev/null || echo boot))" >&2
        sed 's/^/  qemu: /' "$RUN_DIR/qemu-$role.log" >&2 || true
        echo "$EXIT_HARNESS"
    fi
    echo "rdma_vm: last console lines$tag (full log: --console-log FILE):" >&2
    tail -n 25 "$RUN_DIR/console-$role.log" 2>/dev/null | sed 's/^/  | /' >&2 || true
}

# Seconds from START_NS until the guest wrote io/ready (its command started).
boot_seconds() {
    local ready=$1 mtime
    mtime=$(stat -c %.3Y "$ready" 2>/dev/null) || return 1
    awk -v m="$mtime" -v s="$START_NS" 'BEGIN { printf "%.1f", m - s / 1e9 }'
}

# --- cleanup ----------------------------------------------------------------------------
RUN_DIR=
declare -A GUEST_PIDS=()
STREAM_PIDS=()
HUB_PID=
ROLES=()
IPS=()

cleanup() {
    local pid
    for pid in "${GUEST_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${GUEST_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    for pid in "${STREAM_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    if [[ -n $HUB_PID ]]; then
        kill "$HUB_PID" 2>/dev/null || true
        wait "$HUB_PID" 2>/dev/null || true
    fi
    if [[ -n $RUN_DIR && -d $RUN_DIR ]]; then
        rm -rf "$RUN_DIR"
    fi
}

# Args: EXIT_STATUS (128 + signal number)
on_signal() {
    echo "rdma_vm: interrupted, stopping the guest" >&2
    exit "$1"
}

# --- main ---------------------------------------------------------------------------------
main() {
    parse_args "$@"
    ((EUID == 0)) || die "must run as root (apt-get, mknod, 9p passthrough of /)"
    ensure_packages
    ensure_kernel
    if [[ $MODE == prepare ]]; then
        log "ready: kernel $KVER in $KROOT"
        return 0
    fi

    trap cleanup EXIT
    trap 'on_signal 129' HUP
    trap 'on_signal 130' INT
    trap 'on_signal 143' TERM
    RUN_DIR=$(mktemp -d /tmp/rdma_vm.XXXXXX)
    INITRD=$RUN_DIR/initramfs.cpio
    build_initramfs "$INITRD" "$RUN_DIR/initramfs"

    local roles=() i n
    START_NS=$(date +%s%N)
    if [[ $MODE == single ]]; then
        roles=(single)
        ROLES=(single)
        IPS=("$IP_A")
        write_guest_io "$RUN_DIR/io-single" 0 "${CMD[@]}"
        log "booting guest (kernel $KVER, TCG, ${SMP} vCPU, deadline ${TIMEOUT}s)"
        start_guest single "$RUN_DIR/io-single" "$RUN_DIR/console-single.log" \
            "user,id=n0,restrict=on" 52:54:00:12:34:56
    else
        n=${#CMD[@]}
        ROLES=("${GROUP_ROLES[@]:0:n}")
        roles=("${ROLES[@]}")
        IPS=()
        for ((i = 0; i < n; i++)); do IPS+=("10.0.2.$((15 + i))"); done
        mkdir -p "$RUN_DIR/pairsync"
        # Two guests: each NIC's datagrams go straight to the other's port.
        # Three or more: to the hub's port (the last), which copies each to
        # every other guest.
        pick_udp_ports $((n == 2 ? 2 : n + 1))
        local hub=$((PORT_BASE + n)) link ports=()
        for ((i = 0; i < n; i++)); do ports+=($((PORT_BASE + i))); done
        if ((n > 2)); then
            /usr/bin/python3 "$SCRIPT_DIR/udp_hub.py" "$hub" "${ports[@]}" &
            HUB_PID=$!
            link="hub udp 127.0.0.1:$hub"
        else
            link="udp 127.0.0.1:${ports[0]}<->${ports[1]}"
        fi
        for ((i = 0; i < n; i++)); do
            write_guest_io "$RUN_DIR/io-${ROLES[$i]}" "$i" bash -c "${CMD[$i]}"
        done
        log "booting guests ${ROLES[*]} (kernel $KVER, TCG, ${SMP} vCPU each, link $link, deadline ${TIMEOUT}s)"
        for ((i = 0; i < n; i++)); do
            local to=$hub
            ((n == 2)) && to=${ports[$((1 - i))]}
            start_guest "${ROLES[$i]}" "$RUN_DIR/io-${ROLES[$i]}" "$RUN_DIR/console-${ROLES[$i]}.log" \
                "socket,id=n0,udp=127.0.0.1:$to,localaddr=127.0.0.1:${ports[$i]}" \
                "52:54:00:12:34:0$(printf '%x' $((10 + i)))"
        done
    fi

    # Stream output (and, with -v, the console) while the guests run.
    local role prefix pid
    for role in "${roles[@]}"; do
        prefix=""
        [[ $MODE == pair ]] && prefix="[$role] "
        pid=${GUEST_PIDS[$role]}
        stream "$pid" "$RUN_DIR/io-$role/stdout" "$prefix" &
        STREAM_PIDS+=($!)
        stream "$pid" "$RUN_DIR/io-$role/stderr" "$prefix" >&2 &
        STREAM_PIDS+=($!)
        if ((VERBOSE)); then
            touch "$RUN_DIR/console-$role.log"
            stream "$pid" "$RUN_DIR/console-$role.log" "console${prefix:+ $prefix}| " >&2 &
            STREAM_PIDS+=($!)
        fi
    done

    # Wait for the guests; report boot time as soon as each command starts.
    local -A qemu_status=() reported=()
    local remaining=${#roles[@]} secs
    while ((remaining > 0)); do
        for role in "${roles[@]}"; do
            [[ -n ${qemu_status[$role]:-} ]] && continue
            if [[ -z ${reported[$role]:-} && -e $RUN_DIR/io-$role/ready ]]; then
                reported[$role]=1
                local who=guest
                [[ $MODE == pair ]] && who="guest $role"
                secs=$(boot_seconds "$RUN_DIR/io-$role/ready") &&
                    log "$who up, rxe0 ready after ${secs}s; running command"
            fi
            if ! kill -0 "${GUEST_PIDS[$role]}" 2>/dev/null; then
                qemu_status[$role]=0
                wait "${GUEST_PIDS[$role]}" || qemu_status[$role]=$?
                remaining=$((remaining - 1))
                # A pair guest that died without a status leaves its peer
                # waiting (barrier, server) until the deadline: stop it now.
                if [[ $MODE == pair && ! -s $RUN_DIR/io-$role/status ]]; then
                    stop_other_guests "$role"
                fi
            fi
        done
        ((remaining > 0)) && sleep 0.2
    done
    # The streams end on their own once they have copied everything.
    for pid in "${STREAM_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    STREAM_PIDS=()

    if [[ -n $CONSOLE_LOG ]]; then
        if [[ $MODE == single ]]; then
            cp "$RUN_DIR/console-single.log" "$CONSOLE_LOG"
        else
            for role in "${roles[@]}"; do
                cp "$RUN_DIR/console-$role.log" "$CONSOLE_LOG.$role"
            done
        fi
    fi

    local status final=0
    for role in "${roles[@]}"; do
        status=$(guest_result "$role" "${qemu_status[$role]}")
        if [[ $MODE == pair ]]; then
            log "guest $role: exit status $status"
        fi
        ((final == 0)) && final=$status
    done
    log "done in $(awk -v s="$START_NS" -v e="$(date +%s%N)" 'BEGIN { printf "%.1f", (e - s) / 1e9 }')s"
    return "$final"
}

main "$@"
