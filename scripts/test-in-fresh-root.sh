#!/usr/bin/env bash
# Runs the README's test command inside a pristine Debian 12 root, so that a
# tool or package the scripts use but do not install fails here, as it would
# on a new machine, instead of hiding behind what this host happens to have.
#
#   scripts/test-in-fresh-root.sh            as root; what .ci/run does
#
# Steps:
#   1. The untouched `debootstrap --variant=minbase bookworm` tree is cached,
#      and only that, as a tarball in $VSOCKET_CI_CACHE (default
#      /var/cache/vsocket-ci); it is made once, from Debian's archive.
#   2. Every run extracts a fresh copy, copies the checkout in (the files git
#      tracks plus untracked ones it does not ignore; no build trees), and,
#      in a private mount and PID namespace, mounts /proc, /sys, /dev,
#      /dev/pts and a tmpfs /dev/shm.  apt's archive directory
#      (/var/cache/apt/archives) is bind-mounted from $VSOCKET_CI_CACHE/apt,
#      so .deb files downloaded by one run are not downloaded again by the
#      next.  Only downloads are kept: every package is still installed by
#      the project's own scripts into the fresh root, and apt checks each
#      cached file's hash against the package lists before it uses it.
#      The compiler's outputs are kept the same way, in $VSOCKET_CI_CACHE/ccache
#      (ccache, keyed by the preprocessed source, the compiler and every
#      flag; a header the fresh root lacks still fails the build, and every
#      program is still linked and every test run).  VSOCKET_CI_CCACHE=0
#      builds without it.
#   3. It runs the README's test command exactly as the README writes it,
#      as root, in the copy, with a clean environment (CI and
#      VSOCKET_SKIP_RDMA_VM pass through; VSOCKET_THROWAWAY_ROOT=1 tells
#      scripts/test-install.sh that it may install the .deb with dpkg).
#   4. The namespace takes its mounts and processes with it when the command
#      ends; the root is then removed, whatever the result.
#
# Environment: VSOCKET_CI_CACHE (cache dir), VSOCKET_CI_WORK (where roots are
# made, default /var/tmp), VSOCKET_CI_MIRROR (default http://deb.debian.org/debian),
# VSOCKET_CI_KEEP_ROOT=1 (keep the root afterwards, for a post-mortem),
# VSOCKET_CI_CCACHE=0 (no compiler cache: every object compiled anew).
# Exit status: the test command's; 125 when the root could not be made.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${VSOCKET_CI_CACHE:-/var/cache/vsocket-ci}
work=${VSOCKET_CI_WORK:-/var/tmp}
mirror=${VSOCKET_CI_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
tarball=$cache/$suite-minbase.tar

die() { echo "fresh-root: error: $*" >&2; exit 125; }
log() { echo "fresh-root: $*" >&2; }

((EUID == 0)) || die "must run as root (debootstrap, chroot, mounts)"

# ---- the README's test command: the second line of its first sh block ----
readme_test_command() {
  awk '/^```sh$/ { inblock = 1; next }
       inblock && /^```/ { exit }
       inblock { sub(/[ \t]*#.*$/, ""); if (length) print }' "$top/README.md" |
    sed -n 2p
}
test_cmd=$(readme_test_command)
[[ $test_cmd == ./scripts/* ]] ||
  die "cannot find the test command in README.md (got '$test_cmd')"

# ---- 1. the cached minbase tarball ----
host_install() {  # packages the host needs to make the root
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing on the host: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_minbase() {
  mkdir -p "$cache"
  local lockfd
  exec {lockfd}>"$cache/.lock"
  flock -w 900 "$lockfd" || die "timed out waiting for $cache/.lock"
  if [[ ! -s $tarball ]]; then
    host_install debootstrap
    local tmp=$cache/$suite-minbase.partial
    rm -rf "$tmp"
    log "debootstrap --variant=minbase $suite from $mirror (once; cached in $tarball)"
    debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
      tail -n 20 "$cache/debootstrap.log" >&2
      die "debootstrap failed (log: $cache/debootstrap.log)"
    }
    tar -C "$tmp" --numeric-owner -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
    rm -rf "$tmp"
  fi
  exec {lockfd}>&-
}

# ---- 2. a fresh root with the checkout in it ----
copy_checkout() {  # DEST
  local dest=$1
  mkdir -p "$dest"
  if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
       while IFS= read -r -d '' f; do  # a deleted file is still listed
         if [[ -e $f || -L $f ]]; then printf '%s\0' "$f"; fi
       done | tar --null -T - -cf -) | tar -C "$dest" -xf -
  else
    (cd "$top" && tar --exclude='./build*' -cf - .) | tar -C "$dest" -xf -
  fi
}

root=
cleanup() {
  if [[ -n $root && -d $root ]]; then
    if [[ ${VSOCKET_CI_KEEP_ROOT:-} == 1 ]]; then
      log "kept the root at $root"
    elif grep -q " $root" /proc/self/mounts; then
      log "mounts are still held under $root; not removing it"
    else
      rm -rf --one-file-system "$root"
    fi
  fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_minbase
root=$(mktemp -d "$work/vsocket-fresh-root.XXXXXX")
log "extracting a fresh root in $root"
tar -C "$root" --numeric-owner -xf "$tarball"
# What a fresh Debian 12 install has beside the minimal tree: its security
# and updates suites, and a resolver.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
EOF
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The download cache: apt's own layout (partial/ is apt's, owned by _apt).
debs=$cache/apt
mkdir -p "$debs/partial"
# The compiler cache, seen in the root as /var/cache/vsocket-ccache.
objs=$cache/ccache
if [[ ${VSOCKET_CI_CCACHE:-1} != 0 ]]; then
  mkdir -p "$objs" "$root/var/cache/vsocket-ccache"
else
  objs=
fi
copy_checkout "$root/vsocket"

# ---- 3. run the README's command in a private mount + PID namespace ----
log "running '$test_cmd' in the fresh root"
start=$SECONDS
status=0
env_pass=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
          HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}"
          VSOCKET_THROWAWAY_ROOT=1)  # scripts/test-install.sh may dpkg -i here
[[ -n ${VSOCKET_SKIP_RDMA_VM:-} ]] && env_pass+=(VSOCKET_SKIP_RDMA_VM="$VSOCKET_SKIP_RDMA_VM")
[[ -n $objs ]] && env_pass+=(VSOCKET_CCACHE_DIR=/var/cache/vsocket-ccache)
unshare --mount --pid --fork --kill-child --propagation private -- bash -euc '
  root=$1 debs=$2 objs=$3; shift 3
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null ||
    mount --bind /dev/pts "$root/dev/pts"
  mount -t tmpfs -o mode=1777,size=50% tmpfs "$root/dev/shm"
  mount --bind "$debs" "$root/var/cache/apt/archives"
  if [[ -n $objs ]]; then mount --bind "$objs" "$root/var/cache/vsocket-ccache"; fi
  exec chroot "$root" /usr/bin/env -i "$@"
' fresh-root "$root" "$debs" "$objs" "${env_pass[@]}" bash -c "cd /vsocket && $test_cmd" || status=$?
log "'$test_cmd' exited $status after $((SECONDS - start)) s in the fresh root"
exit "$status"
