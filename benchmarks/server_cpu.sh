#!/usr/bin/env bash
# The receiving server's own CPU per message, which vsocket-bench's
# client+server figure hides: `vsocket-bench --server` under
# VSOCKET_TRANSPORT=POLICY reads with --recv-size READ, a client on plain
# system calls (VSOCKET_TRANSPORT=tcp) streams SIZE-byte messages for 2 s,
# and the server's utime+stime (/proc/<pid>/stat) and voluntary context
# switches (/proc/<pid>/status: how often it slept) are read around it.
# With POLICY=toe it also prints the peeking io_uring_enter calls per
# message (VSOCKET_STATS' toe_engine section).
#
# Usage: benchmarks/server_cpu.sh POLICY READ [SIZE] [--bench PATH]
set -euo pipefail
policy=$1 read_size=$2 size=${3:-64}
bench="$(cd "$(dirname "$0")/.." && pwd)/build-release/benchmarks/vsocket-bench"
[[ "${4:-}" == "--bench" ]] && bench=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
VSOCKET_STATS=1 VSOCKET_TRANSPORT=$policy "$bench" --server --port "$port" \
  --recv-size "$read_size" --idle-exit-ms 1500 >"$work/server.out" 2>"$work/server.err" &
server=$!
sleep 0.3
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
switches() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$server/status"; }
t0=$(ticks) w0=$(switches)
VSOCKET_TRANSPORT=tcp "$bench" --client 127.0.0.1 --port "$port" --transports tcp \
  --mode stream --sizes "$size" --duration-ms 2000 --warmup-ms 0 >"$work/client.out" 2>&1
t1=$(ticks) w1=$(switches)
wait "$server" || true
row=$(grep -E '^tcp ' "$work/client.out")
bytes=$(grep -oE '"bytes_received":[0-9]+' "$work/server.err" | head -1 | cut -d: -f2)
enters=$(grep -oE '"readahead_enters":[0-9]+' "$work/server.err" | cut -d: -f2 || true)
awk -v p="$policy" -v row="$row" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    -v b="${bytes:-0}" -v sz="$size" -v e="${enters:-}" -v w=$((w1 - w0)) 'BEGIN {
  split(row, f, " ");  # transport size unit GB/s Mmsg/s ...
  msgs = f[5] * 1e6 * 2
  printf "%s server: %.3f GB/s, %d messages, server CPU %.3f us/msg, sleeps per message %.4f", p, f[4], msgs, t * 1e6 / hz / msgs, w / msgs
  if (e != "" && b > 0) printf ", peeking io_uring_enter per message %.4f", e / (b / sz)
  printf "\n"
}'
