#!/usr/bin/env bash
# Where a server's time goes per request, plain against vsocket-run on both
# ends, in the same run: system calls (strace -c -f on the server, in a
# second run of the same client), CPU time (utime+stime from /proc) and
# context switches of the server (in the first run, without strace),
# divided by the requests served.  run.sh measures the rates.
#
# Usage: benchmarks/apps/per_request.sh [--vsocket-run PATH] [--requests N]
# Needs strace, redis-server/redis-benchmark, nginx and wrk
# (scripts/install-deps.sh --apps).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
vrun="$top/build-release/preload/vsocket-run"
requests=200000
while (($#)); do
  case "$1" in
    --vsocket-run) vrun=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v strace >/dev/null || { echo "needs strace" >&2; exit 1; }
work=$(mktemp -d)
server_pid=""
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do ss -Htln "sport = :$1" | grep -q . && return 0; sleep 0.1; done; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
switches() {  # voluntary + involuntary, all threads
  local total=0 t
  for t in /proc/"$1"/task/*/status; do
    total=$((total + $(awk '/ctxt_switches/ {s += $2} END {print s}' "$t")))
  done
  echo "$total"
}
run() { local mode=$1; shift; if [[ $mode == vsocket ]]; then "$vrun" -- "$@"; else "$@"; fi; }

# measure NAME MODE SERVER_PID REQUESTS CLIENT_CMD...: prints one table
# row.  REQUESTS is a count, or "wrk" to take it from wrk's report.
measure() {
  local name=$1 mode=$2 pid=$3 count=$4; shift 4
  local hz; hz=$(getconf CLK_TCK)
  # CPU and context switches from a run without strace (which would make
  # every system call cost a ptrace stop) ...
  local t0 s0; t0=$(cpu_ticks "$pid"); s0=$(switches "$pid")
  run "$mode" "$@" >"$work/client.$mode" 2>&1
  local t1 s1; t1=$(cpu_ticks "$pid"); s1=$(switches "$pid")
  local served=$count
  if [[ $count == wrk ]]; then
    served=$(awk '/requests in/ {print $1}' "$work/client.$mode")
  fi
  # ... and the system calls from the same client run again under it.
  strace -c -f -q -p "$pid" -o "$work/strace.$mode" &
  local st=$!
  sleep 0.5
  run "$mode" "$@" >"$work/client2.$mode" 2>&1
  kill -INT "$st"; wait "$st" 2>/dev/null || true
  local traced=$count
  if [[ $count == wrk ]]; then
    traced=$(awk '/requests in/ {print $1}' "$work/client2.$mode")
  fi
  # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
  local calls; calls=$(awk '$NF == "total" {print $4}' "$work/strace.$mode")
  local top; top=$(awk 'NR > 2 && $1 ~ /^[0-9.]+$/ && $NF != "total" {
      printf "%s %s, ", $NF, $4 }' "$work/strace.$mode" | cut -c1-80)
  awk -v n="$name" -v m="$mode" -v r="${served:-1}" -v tr="${traced:-1}" \
      -v c="${calls:-0}" -v cpu=$((t1 - t0)) -v hz="$hz" -v sw=$((s1 - s0)) \
      -v top="$top" 'BEGIN {
    printf "| %s | %s | %.3f | %.2f | %.3f | %s |\n", n, m, c / tr,
           cpu / hz * 1e6 / r, sw / r, top }'
}

echo "| benchmark | mode | syscalls/request (server) | server CPU µs/request | context switches/request | top calls (count) |"
echo "|---|---|---|---|---|---|"
for mode in plain vsocket; do
  port=$(free_port)
  run "$mode" redis-server --port "$port" --save '' --appendonly no >/dev/null 2>&1 &
  wait_port "$port"
  server_pid=$(pgrep -n -f "redis-server.*:$port")
  measure "redis GET, 50 clients, -P 1" "$mode" "$server_pid" "$requests" \
    redis-benchmark -p "$port" -t get -n "$requests" -c 50 -P 1 -q
  kill "$server_pid"; sleep 0.2; server_pid=""
done
for mode in plain vsocket; do
  port=$(free_port)
  root="$work/www.$mode"
  mkdir -p "$root/logs"
  head -c 65536 /dev/urandom >"$root/f64k"
  printf '%s\n' "worker_processes 1;" "daemon off;" "master_process off;" \
    "error_log $root/logs/error.log;" "pid $root/nginx.pid;" \
    "events { worker_connections 1024; }" \
    "http { access_log off; server { listen 127.0.0.1:$port; root $root; } }" \
    >"$root/nginx.conf"
  run "$mode" nginx -p "$root" -c "$root/nginx.conf" >/dev/null 2>&1 &
  wait_port "$port"
  server_pid=$(pgrep -n -f "nginx.*$root/nginx.conf")
  measure "nginx 64 KiB file, wrk -t1 -c10, 3 s" "$mode" "$server_pid" wrk \
    wrk -t1 -c10 -d3s "http://127.0.0.1:$port/f64k"
  kill "$server_pid"; sleep 0.2; server_pid=""
done
