#!/usr/bin/env bash
# Real programs, plain and then under vsocket-run (both ends), in the same
# run, with the ratio vsocket/plain ("higher is better" for rates, "lower is
# better" for times; the table says which).
#
# Usage: benchmarks/apps/run.sh [--vsocket-run PATH] [--seconds N] [--only NAME]
#                               [--transport T] [--server-only]
# NAME: sockperf iperf3 redis nginx memcached gloo.  --transport: the
# VSOCKET_TRANSPORT of the vsocket runs (default auto).  --server-only: only
# the server runs under vsocket-run; the client stays a plain program, so
# the connection's peer is ordinary kernel TCP (how toe is meant to be
# measured: --transport toe --server-only).  Needs the packages installed by
# scripts/install-deps.sh --apps.  Every server listens on 127.0.0.1 with an
# ephemeral port and is killed when its measurement ends.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
vrun="$top/build-release/preload/vsocket-run"
seconds=3
only=""
transport=auto
server_only=0
while (($#)); do
  case "$1" in
    --vsocket-run) vrun=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --server-only) server_only=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$vrun" ]] || { echo "vsocket-run not found at $vrun (build first)" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # port: waits until something listens (10 s at most), without
  # connecting (a one-shot server such as iperf3 -1 would take the probe)
  for _ in $(seq 100); do
    ss -Htln "sport = :$1" | grep -q . && return 0
    sleep 0.1
  done
  echo "nothing listens on $1" >&2; return 1
}
# run_server MODE CMD...: MODE is plain or vsocket; remembers the pid.
run_server() {
  local mode=$1; shift
  if [[ $mode == vsocket ]]; then "$vrun" --stats --transport "$transport" -- "$@" >"$work/server.out" 2>"$work/server.err" &
  else "$@" >"$work/server.out" 2>"$work/server.err" &
  fi
  pids+=($!)
}
stop_servers() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
client() {  # MODE CMD...
  local mode=$1; shift
  if [[ $mode == vsocket && $server_only == 0 ]]; then "$vrun" --stats --transport "$transport" -- "$@"; else "$@"; fi
}

results=()
record() {  # name unit better plain vsocket
  local ratio
  ratio=$(awk -v p="$4" -v v="$5" -v b="$3" 'BEGIN{ if (p<=0||v<=0) {print "n/a"} else if (b=="higher") printf "%.2fx", v/p; else printf "%.2fx", p/v }')
  results+=("$(printf '%-34s %12s %12s %9s  (%s, %s is better)' "$1" "$4" "$5" "$ratio" "$2" "$3")")
}

bench_sockperf() {
  for mode in plain vsocket; do
    local port; port=$(free_port)
    run_server $mode sockperf server --tcp -i 127.0.0.1 -p "$port"
    wait_port "$port"
    # --mps caps the rate: at full speed over shared memory sockperf's own
    # sequence-number budget overflows ("_seqN > m_maxSequenceNo").
    client $mode sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$seconds" --mps 100000 >"$work/pp.$mode" 2>&1
    client $mode sockperf throughput --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$seconds" >"$work/tp.$mode" 2>&1
    stop_servers
  done
  p50() { grep -oE 'percentile 50.000 = +[0-9.]+' "$1" | awk '{print $NF}'; }
  mps() { grep -oE 'Summary: Message Rate is [0-9]+' "$1" | awk '{print $NF}'; }
  record "sockperf ping-pong 64B p50 (one-way)" us lower "$(p50 "$work/pp.plain")" "$(p50 "$work/pp.vsocket")"
  record "sockperf throughput 64B" msg/s higher "$(mps "$work/tp.plain")" "$(mps "$work/tp.vsocket")"
}

bench_iperf3() {
  for len in 64 1K 64K; do
    local vals=()
    for mode in plain vsocket; do
      local port; port=$(free_port)
      run_server $mode iperf3 -s -1 -B 127.0.0.1 -p "$port"
      wait_port "$port"
      client $mode iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -l "$len" -J >"$work/iperf.$mode" 2>/dev/null || true
      stop_servers
      vals+=("$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (d["end"]["sum_received"]["bits_per_second"]/8e9))' "$work/iperf.$mode" 2>/dev/null || echo 0)")
    done
    record "iperf3 ${len} writes" GB/s higher "${vals[0]}" "${vals[1]}"
  done
}

bench_redis() {
  for pipeline in 1 16; do
    local get=() set=() ping=()
    for mode in plain vsocket; do
      local port; port=$(free_port)
      run_server $mode redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no
      wait_port "$port"
      client $mode redis-benchmark -p "$port" -t set,get,ping -n 100000 -c 50 -P "$pipeline" -q >"$work/redis.$mode" 2>&1 || true
      stop_servers
      rps() { tr '\r' '\n' <"$work/redis.$mode" | grep -E "^$1: [0-9]" | awk '{print $2}' | tail -1; }
      get+=("$(rps GET)")
      set+=("$(rps SET)")
      ping+=("$(rps PING_MBULK)")
    done
    record "redis GET -P $pipeline" req/s higher "${get[0]}" "${get[1]}"
    record "redis SET -P $pipeline" req/s higher "${set[0]}" "${set[1]}"
    record "redis PING -P $pipeline" req/s higher "${ping[0]}" "${ping[1]}"
  done
}

bench_nginx() {
  local vals=()
  head -c 65536 /dev/urandom >"$work/file.bin"
  for mode in plain vsocket; do
    local port; port=$(free_port)
    cat >"$work/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; error_log $work/nginx-error.log; pid $work/nginx.pid;
events { worker_connections 256; }
http { access_log off; server { listen 127.0.0.1:$port; root $work; } }
CONF
    run_server $mode nginx -p "$work" -c "$work/nginx.conf"
    wait_port "$port"
    client $mode wrk -t1 -c10 -d"${seconds}s" "http://127.0.0.1:$port/file.bin" >"$work/wrk.$mode" 2>&1 || true
    stop_servers
    vals+=("$(grep -E '^Requests/sec' "$work/wrk.$mode" | awk '{print $2}')")
  done
  record "nginx 64 KiB file, wrk -c10" req/s higher "${vals[0]}" "${vals[1]}"
}

bench_memcached() {
  # memcached's defaults (4 worker threads); memaslap (libmemcached-tools)
  # with one thread and 16 connections, 9:1 get/set.  Run as root it must
  # name a user: as root the client's user, so shared memory applies; as
  # nobody (how a service runs) it is another user, and the connections take
  # kernel TCP (uid_mismatch) until cross-user shared memory exists.
  local user
  for user in root nobody; do
    local vals=()
    for mode in plain vsocket; do
      local port; port=$(free_port)
      run_server $mode memcached -l 127.0.0.1 -p "$port" -U 0 -u "$user"
      wait_port "$port"
      client $mode memcaslap -s "127.0.0.1:$port" -T 1 -c 16 -t "${seconds}s" >"$work/memc.$mode" 2>&1 || true
      stop_servers
      vals+=("$(grep -oE 'TPS: [0-9]+' "$work/memc.$mode" | tail -1 | awk '{print $2}')")
    done
    record "memcached -u $user, memaslap -c16" ops/s higher "${vals[0]}" "${vals[1]}"
  done
}

bench_gloo() {
  local vals=()
  for mode in plain vsocket; do
    local port; port=$(free_port)
    run_server $mode /usr/bin/python3 "$here/gloo_allreduce.py" 1 "$port" 64 5
    client $mode /usr/bin/python3 "$here/gloo_allreduce.py" 0 "$port" 64 5 >"$work/gloo.$mode" 2>&1 || true
    stop_servers
    vals+=("$(grep -oE 'allreduce_ms=[0-9.]+' "$work/gloo.$mode" | cut -d= -f2)")
  done
  record "gloo all_reduce 64 MiB, 2 ranks" ms lower "${vals[0]}" "${vals[1]}"
}

for name in sockperf iperf3 redis nginx memcached gloo; do
  [[ -z "$only" || "$only" == "$name" ]] || continue
  echo "== $name" >&2
  "bench_$name" || echo "$name failed" >&2
done
echo "vsocket runs: VSOCKET_TRANSPORT=$transport, $( ((server_only)) && echo "server only (plain clients)" || echo "both ends")"
printf '%-34s %12s %12s %9s\n' "benchmark" "plain" "vsocket" "ratio"
printf '%s\n' "${results[@]}"
