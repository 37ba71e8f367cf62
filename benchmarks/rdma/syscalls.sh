#!/usr/bin/env bash
# System calls per connection on both ends, kernel TCP against
# --transport rdma, in one Soft-RoCE guest (tests/rdma_vm/run-in-guest.sh).
# The pair is tests/preload/progs/many_clients (one client process opens N
# connections to one server process, 64 B echoed on each, all held, then
# closed), run under `strace -f -c` with N and with 1 connection: per
# connection = (calls(N) - calls(1)) / (N - 1), so process start-up and the
# first connection's pool registration cancel out.  Then one rdma run of
# ATTR_N (5) and one of 1 connection under `strace -f -yy` attribute each
# call by the descriptor it works on (rdma_cm's and verbs' device files,
# sysfs, vsocket's Unix readiness socket, the TCP socket, the progress
# thread's epoll) or its kind (memory, threads).  (`strace -k` would name
# the calling library, but under TCG it takes ~0.25 s a call: too slow.)
#
#   benchmarks/rdma/syscalls.sh BUILD_DIR [N]        (host, as root; N=20)
#   VSOCKET_RDMA_LINKS=1 benchmarks/rdma/syscalls.sh BUILD_DIR   (sockets over links)
#
# BUILD_DIR needs preload/vsocket-run and tests/preload/progs/many_clients.
# Prints two markdown tables.  Exit status: 0; 1 a run failed; 124/125 as
# run-in-guest.sh.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [[ ${1:-} != --in-guest ]]; then
  (($# >= 1)) || { sed -n '2,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
  build=$(cd "$1" && pwd)
  env_args=()  # sockets over links or not (rdma_backend/README.md "Links")
  for var in VSOCKET_RDMA_LINKS VSOCKET_RDMA_QPS_PER_LINK; do
    if [[ -n ${!var:-} ]]; then env_args+=(--env "$var=${!var}"); fi
  done
  exec "$repo/tests/rdma_vm/run-in-guest.sh" --timeout 900 "${env_args[@]}" \
    -- bash "$repo/benchmarks/rdma/syscalls.sh" --in-guest "$build" "${2:-20}"
fi

build=$2 n=$3 attr_n=5
ip=${VSOCKET_RDMA_SELF_IP:?run in the guest}
prog=$build/tests/preload/progs/many_clients
run=$build/preload/vsocket-run
out=$(mktemp -d)
export PTEST_IP=$ip VSOCKET_RDMA_PROBE_MS=3000
port=18700

source "$repo/tests/rdma/guest-common.sh"  # wait_listening

# One pair.  Args: TAG MODE(tcp|rdma) N STRACE-OPTION...
pair() {
  local tag=$1 mode=$2 count=$3 server
  shift 3
  local -a wrap=()
  [[ $mode == rdma ]] && wrap=("$run" --transport rdma --)
  port=$((port + 1))
  strace -f "$@" -o "$out/$tag.server" "${wrap[@]}" "$prog" server $port "$count" \
    >"$out/$tag.server.out" 2>&1 &
  server=$!
  wait_listening $port
  strace -f "$@" -o "$out/$tag.client" "${wrap[@]}" "$prog" client $port "$count" \
    >"$out/$tag.client.out" 2>&1
  wait "$server" || true
  if ! grep -q '^PASS' "$out/$tag.client.out" || ! grep -q '^PASS' "$out/$tag.server.out"; then
    echo "syscalls: run $tag failed:" >&2
    tail -n 5 "$out/$tag.server.out" "$out/$tag.client.out" >&2
    return 1
  fi
  echo "syscalls: $tag done ($SECONDS s)" >&2
}

for mode in tcp rdma; do
  pair "$mode.$n" $mode "$n" -c
  pair "$mode.1" $mode 1 -c
done
pair "y.$attr_n" rdma $attr_n -yy -qq
pair y.1 rdma 1 -yy -qq

/usr/bin/python3 - "$out" "$n" "$attr_n" <<'EOF'
import collections, re, sys
out, n, attr_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def counts(path):  # strace -c summary: calls per syscall name
    c = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            c[f[-1]] = int(f[3])
    return c

def per_conn(tag, role, big, small, big_n):
    a, b = counts(f"{out}/{tag}.{big}.{role}"), counts(f"{out}/{tag}.{small}.{role}")
    return {k: (a.get(k, 0) - b.get(k, 0)) / (big_n - 1) for k in set(a) | set(b)}

cols = [("tcp", "server"), ("tcp", "client"), ("rdma", "server"), ("rdma", "client")]
table = {c: per_conn(c[0], c[1], n, 1, n) for c in cols}
names = sorted({k for t in table.values() for k, v in t.items() if abs(v) >= 0.5},
               key=lambda k: -max(table[c].get(k, 0) for c in cols))
print(f"System calls per connection ({n} vs 1 connection, 64 B echoed, strace -f -c):\n")
print("| system call | kernel TCP server | kernel TCP client | rdma server | rdma client |")
print("|---|---|---|---|---|")
for k in names:
    print(f"| {k} | " + " | ".join(f"{table[c].get(k, 0):.1f}" for c in cols) + " |")
print("| **total** | " + " | ".join(f"**{sum(table[c].values()):.1f}**" for c in cols) + " |")

# strace -yy: each call's descriptors are shown with what they are, which
# says whose call it was: /dev/infiniband/rdma_cm (librdmacm),
# /dev/infiniband/uverbs* and its event files (libibverbs and the
# provider), sysfs (device discovery by both), Unix sockets (vsocket's
# readiness socket), TCP sockets (the connection itself: the program's
# calls and vsocket's pairing), the progress thread's epoll and timer.
def origin(name, args):
    fd = re.match(r"\[?\{?(?:fd=)?-?\d+<([^>]*)>", args)
    what = fd.group(1) if fd else ""
    if name in ("openat", "open", "newfstatat", "readlink", "access", "statx"):
        what = args
    if "rdma_cm" in what: return "rdma_cm (/dev/infiniband/rdma_cm)"
    if "uverbs" in what or "infinibandevent" in what: return "verbs (/dev/infiniband/uverbs0, event files)"
    if "/sys/" in what or "infiniband" in what: return "device discovery (sysfs)"
    if what.startswith(("UNIX", "socket:")) or name == "socketpair": return "vsocket readiness socket (Unix)"
    if what.startswith("TCP") or name in ("socket", "accept", "accept4", "connect"): return "TCP socket"
    if "eventpoll" in what or "timerfd" in what or name.startswith("epoll"): return "vsocket progress thread (epoll, timer)"
    if name in ("mmap", "munmap", "madvise", "mprotect", "brk", "mremap"): return "memory (anonymous mappings)"
    if name in ("futex", "clock_nanosleep", "nanosleep", "sched_yield", "clone", "clone3",
                "set_robust_list", "rseq", "rt_sigprocmask", "gettid", "getpid"):
        return "threads and scheduling"
    return "other (" + name + ")"

def attribute(path):
    c = collections.Counter()
    for line in open(path):
        m = re.match(r"(?:\d+ +)?(\w+)\((.*)", line)
        if not m or "resumed>" in line: continue
        c[(origin(m.group(1), m.group(2)), m.group(1))] += 1
    return c

print(f"\nWhere the rdma calls go ({attr_n} vs 1 connection, strace -f -yy):\n")
print("| end | descriptor / kind | calls per connection | system calls (per connection) |")
print("|---|---|---|---|")
for role in ("server", "client"):
    a, b = attribute(f"{out}/y.{attr_n}.{role}"), attribute(f"{out}/y.1.{role}")
    by = collections.defaultdict(dict)
    for key in set(a) | set(b):
        v = (a[key] - b[key]) / (attr_n - 1)
        if abs(v) >= 0.25: by[key[0]][key[1]] = v
    for w in sorted(by, key=lambda w: -sum(by[w].values())):
        top = sorted(by[w].items(), key=lambda kv: -kv[1])[:6]
        print(f"| {role} | {w} | {sum(by[w].values()):.1f} | "
              + ", ".join(f"{k} {v:.1f}" for k, v in top) + " |")
EOF
rm -rf "$out"
