#!/usr/bin/env bash
# Connection setup as a new user meets it: a python3 selectors echo server
# (echo_server.py) and one client (echo_client.py), plain and then both
# ends under vsocket-run, in the same run, with the ratio of setup rates
# vsocket/plain (higher is better).
#
#  burst:      N connections opened at once (blocking connects in a row),
#              then SIZE bytes on each and every echo read back and
#              compared; the time is the first connect to the last echo.
#  sequential: M times connect, 1-byte echo, close.
#
# Then each client run is repeated under `perf stat -e raw_syscalls:
# sys_enter` (the client, less a run with no connections: python's start)
# and `perf stat -p` (the server, during the client's run only): system
# calls per connection of each end.  The vsocket runs' statistics lines
# (--stats) show which path every connection took.
#
# Usage: benchmarks/apps/setup_burst.sh [--vsocket-run PATH] [--transport T]
#          [--connections N] [--size BYTES] [--sequential M] [--rounds R]
#          [--no-counts]
# Defaults: build/preload/vsocket-run, shm, 3000, 4096, 2000, 1.  The soft
# descriptor limit is 4096 (the hard one raised to 65536 when allowed), as
# a user's shell would have it.  --rounds R: R alternated plain/vsocket
# rounds, the median ratio reported.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
vrun="$top/build/preload/vsocket-run"
transport=shm
n=3000
size=4096
seq_n=2000
rounds=1
counts=1
while (($#)); do
  case "$1" in
    --vsocket-run) vrun=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --connections) n=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --sequential) seq_n=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-counts) counts=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$vrun" ]] || { echo "vsocket-run not found at $vrun (build first)" >&2; exit 1; }
py=/usr/bin/python3
if ((counts)) && ! perf stat -e raw_syscalls:sys_enter -o /dev/null true 2>/dev/null; then
  echo "perf cannot count system calls here (not root, or no perf): no counts" >&2
  counts=0
fi
ulimit -Hn 65536 2>/dev/null || true
ulimit -Sn 4096
work=$(mktemp -d)
server_pid=""
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

run() {  # MODE CMD...: plain, or under vsocket-run with statistics
  local mode=$1; shift
  if [[ $mode == vsocket ]]; then "$vrun" --stats --transport "$transport" -- "$@"
  else "$@"; fi
}
start_server() {  # MODE: the echo server, its pid in server_pid, port in port
  rm -f "$work/port"
  local cmd=("$py" "$here/echo_server.py" "$work/port")
  [[ $1 == vsocket ]] && cmd=("$vrun" --stats --transport "$transport" -- "${cmd[@]}")
  "${cmd[@]}" >/dev/null 2>"$work/server.err.$1" &  # (vsocket-run execs: $! is the server)
  server_pid=$!
  for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
  [[ -s $work/port ]] || { echo "echo server did not start" >&2; exit 1; }
  port=$(cat "$work/port")
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }  # NAME < client line
syscalls() { awk -F, '/raw_syscalls/ {print $1}' "$1"; }  # perf -x, output

# one MODE KIND PORT COUNT: a client run; prints its seconds (checked).
one() {
  local mode=$1 kind=$2 port=$3 count=$4 line
  if [[ $kind == burst ]]; then
    line=$(run "$mode" "$py" "$here/echo_client.py" burst "$port" "$count" "$size" 2>>"$work/client.err.$mode")
  else
    line=$(run "$mode" "$py" "$here/echo_client.py" sequential "$port" "$count" 2>>"$work/client.err.$mode")
  fi
  [[ $(field ok <<<"$line") == "$count" ]] || { echo "$mode $kind: $line" >&2; exit 1; }
  field seconds <<<"$line"
}
# counted MODE KIND PORT COUNT: "client server" system calls per connection
counted() {
  local mode=$1 kind=$2 port=$3 count=$4 c0 c1 s1
  perf stat -x, -e raw_syscalls:sys_enter -o "$work/c0" -- \
    bash -c "$(declare -f run); vrun=$vrun transport=$transport; run $mode $py -c 'import socket, selectors'" >/dev/null 2>&1
  perf stat -x, -e raw_syscalls:sys_enter -p "$server_pid" -o "$work/s1" &
  local sp=$!
  sleep 0.3
  perf stat -x, -e raw_syscalls:sys_enter -o "$work/c1" -- \
    bash -c "$(declare -f run); vrun=$vrun transport=$transport; run $mode $py $here/echo_client.py $kind $port $count $size" >/dev/null 2>&1
  kill -INT "$sp"; wait "$sp" 2>/dev/null || true
  c0=$(syscalls "$work/c0"); c1=$(syscalls "$work/c1"); s1=$(syscalls "$work/s1")
  awk -v a="$c0" -v b="$c1" -v s="$s1" -v n="$count" 'BEGIN {printf "%.1f %.1f\n", (b - a) / n, s / n}'
}

printf 'N=%s x %s B burst, %s sequential, transport %s, %s round(s), %s (checkout %s)\n' \
  "$n" "$size" "$seq_n" "$transport" "$rounds" "$vrun" "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf 'load average before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A secs
for kind in burst sequential; do
  count=$n; [[ $kind == sequential ]] && count=$seq_n
  ratios=()
  for ((r = 0; r < rounds; r++)); do
    for mode in plain vsocket; do
      start_server "$mode"
      secs[$mode]=$(one "$mode" "$kind" "$port" "$count")
      stop_server
    done
    ratios+=("$(awk -v p="${secs[plain]}" -v v="${secs[vsocket]}" 'BEGIN {printf "%.3f", p / v}')")
    printf '%-10s round %d: plain %.3f s, vsocket %.3f s: %.2fx (%.0f vs %.0f µs per connection)\n' \
      "$kind" "$r" "${secs[plain]}" "${secs[vsocket]}" "${ratios[-1]}" \
      "$(awk -v s="${secs[plain]}" -v n="$count" 'BEGIN {print s * 1e6 / n}')" \
      "$(awk -v s="${secs[vsocket]}" -v n="$count" 'BEGIN {print s * 1e6 / n}')"
  done
  printf '%-10s median vsocket vs plain: %sx\n' "$kind" \
    "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
  # which path: the statistics lines of the last vsocket runs
  for end in server client; do
    printf '  vsocket %s: %s\n' "$end" "$(grep -o '"transports":{.*},"fallback_reasons":{[^}]*}' \
      "$work/$end.err.vsocket" | tail -1)"
  done
  rm -f "$work"/*.err.*
  if ((counts)); then
    for mode in plain vsocket; do
      start_server "$mode"
      read -r c s < <(counted "$mode" "$kind" "$port" "$count")
      stop_server
      printf '  %-7s system calls per connection: client %s, server %s\n' "$mode" "$c" "$s"
    done
  fi
done
