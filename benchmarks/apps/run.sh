#!/usr/bin/env bash
# Real programs, plain and then under vsocket-run (both ends), in the same
# run, with the ratio vsocket/plain ("higher is better" for rates, "lower is
# better" for times; the table says which).
#
# Usage: benchmarks/apps/run.sh [--vsocket-run PATH] [--seconds N] [--only NAMES]
#                               [--transport T] [--server-only] [--no-counts]
#                               [--markdown FILE]
# NAMES: a comma list of sockperf iperf3 redis nginx memcached gloo ddp (default
# all).  --transport: the VSOCKET_TRANSPORT of the vsocket runs (default
# auto).  --server-only: only the server runs under vsocket-run; the client
# stays a plain program, so the connection's peer is ordinary kernel TCP
# (how toe is meant to be measured: --transport toe --server-only).
# --markdown FILE: also write the table as markdown (docs/BENCHMARKS.md takes
# it from there through benchmarks/report.sh).
#
# Costs: after the rates, every client run is repeated once more under
# `perf stat -e raw_syscalls:sys_enter,task-clock` (the client) and
# `perf stat -p` (the server, for the client's run only): system calls and
# CPU of client + server per message (a round trip for ping-pong, a request
# for servers, a write for iperf3), each program's whole run included; for
# gloo and DDP both ranks per all_reduce or training step, counted over the
# timed loop only (two_ranks).  The rates never come from the counted runs: the
# system-call tracepoint slows every call a little, and plain TCP makes
# more of them.  --no-counts skips that pass (half the time); so does a
# missing perf.
#
# Needs the packages installed by scripts/install-deps.sh --apps (and perf
# for the costs).  Every server listens on 127.0.0.1 with an ephemeral port
# and is killed when its measurement ends.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
vrun="$top/build-release/preload/vsocket-run"
seconds=3
only=""
transport=auto
server_only=0
counts=1
markdown=""
while (($#)); do
  case "$1" in
    --vsocket-run) vrun=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --server-only) server_only=1; shift ;;
    --no-counts) counts=0; shift ;;
    --markdown) markdown=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$vrun" ]] || { echo "vsocket-run not found at $vrun (build first)" >&2; exit 1; }
if ((counts)) && ! perf stat -e raw_syscalls:sys_enter -o /dev/null true 2>/dev/null; then
  echo "perf cannot count system calls here (not root, or no perf): no cost columns" >&2
  counts=0
fi
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

# pass: "rate" (nothing counted) or "count" (the same runs under perf stat;
# record ignores them, cost keeps their system calls and CPU).
pass=rate
perf_events=raw_syscalls:sys_enter,task-clock
client() {  # MODE CMD...: in the count pass, also counts the newest server
  local mode=$1; shift
  local cmd=("$@")
  if [[ $mode == vsocket && $server_only == 0 ]]; then cmd=("$vrun" --stats --transport "$transport" -- "$@"); fi
  if [[ $pass == rate ]]; then "${cmd[@]}"; return; fi
  local counter="" status=0
  rm -f "$work/perf.server" "$work/perf.client"
  if ((${#pids[@]})); then
    perf stat -x, -e "$perf_events" -p "${pids[-1]}" -o "$work/perf.server" &
    counter=$!
    sleep 0.3  # perf attaches
  fi
  perf stat -x, -e "$perf_events" -o "$work/perf.client" -- "${cmd[@]}" || status=$?
  # (perf has ended by itself when the server did, e.g. iperf3 -s -1)
  if [[ -n $counter ]]; then kill -INT "$counter" 2>/dev/null || true; wait "$counter" 2>/dev/null || true; fi
  return "$status"
}
# perf_total EVENT: the EVENT's count (task-clock: ms) over the client and
# the server of the last counted client run.
perf_total() {
  cat "$work/perf.client" "$work/perf.server" 2>/dev/null |
    awk -F, -v e="$1" '$3 == e && $1 ~ /^[0-9.]+$/ {s += $1} END {print s + 0}'
}

results=()  # text rows
rows=()     # tab-separated: name unit better plain vsocket ratio
declare -A costs=()  # "name|mode" -> "syscalls/msg CPU-us/msg"
record() {  # name unit better plain vsocket (rate pass only)
  [[ $pass == rate ]] || return 0
  local ratio
  ratio=$(awk -v p="$4" -v v="$5" -v b="$3" 'BEGIN{ if (p<=0||v<=0) {print "n/a"} else if (b=="higher") printf "%.2fx", v/p; else printf "%.2fx", p/v }')
  results+=("$(printf '%-34s %12s %12s %9s  (%s, %s is better)' "$1" "$4" "$5" "$ratio" "$2" "$3")")
  rows+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "${4:-n/a}" "${5:-n/a}" "$ratio")")
}
cost() {  # name mode messages: after a client run of the count pass
  [[ $pass == count ]] || return 0
  local calls cpu_ms
  calls=$(perf_total raw_syscalls:sys_enter)
  cpu_ms=$(perf_total task-clock)
  costs["$1|$2"]=$(awk -v c="$calls" -v t="$cpu_ms" -v n="$3" 'BEGIN {
    if (n + 0 <= 0 || c + 0 <= 0) print "n/a n/a"; else printf "%.3f %.2f", c / n, t * 1000 / n }')
}

bench_sockperf() {
  for mode in plain vsocket; do
    local port; port=$(free_port)
    run_server $mode sockperf server --tcp -i 127.0.0.1 -p "$port"
    wait_port "$port"
    # --mps caps the rate: at full speed over shared memory sockperf's own
    # sequence-number budget overflows ("_seqN > m_maxSequenceNo").
    client $mode sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$seconds" --mps 100000 >"$work/pp.$mode" 2>&1
    cost "sockperf ping-pong 64B p50 (one-way)" $mode "$(grep -oE 'Total Run.*SentMessages=[0-9]+' "$work/pp.$mode" | grep -oE '[0-9]+$')"
    client $mode sockperf throughput --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$seconds" >"$work/tp.$mode" 2>&1
    cost "sockperf throughput 64B" $mode "$(grep -oE 'Total of [0-9]+ messages' "$work/tp.$mode" | awk '{print $3}')"
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
      local fields
      fields=$(/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["end"]["sum_received"]; print("%.3f %d" % (r["bits_per_second"]/8e9, r["bytes"]))' "$work/iperf.$mode" 2>/dev/null || echo "0 0")
      vals+=("${fields% *}")
      cost "iperf3 -l $len" $mode $(( ${fields#* } / (${len/K/*1024}) ))
    done
    record "iperf3 -l $len" GB/s higher "${vals[0]}" "${vals[1]}"
  done
}

bench_redis() {
  local requests=100000 pipeline test
  for pipeline in 1 16; do
    # ping_mbulk: "-t ping" would run PING_INLINE too, two requests each.
    for test in get set ping_mbulk; do
      local vals=() verb=${test%_mbulk}
      local label="redis ${verb^^} -P $pipeline"
      for mode in plain vsocket; do
        local port; port=$(free_port)
        run_server $mode redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no
        wait_port "$port"
        client $mode redis-benchmark -p "$port" -t "$test" -n "$requests" -c 50 -P "$pipeline" -q >"$work/redis.$mode" 2>&1 || true
        cost "$label" $mode "$requests"
        stop_servers
        vals+=("$(tr '\r' '\n' <"$work/redis.$mode" | grep -E '^[A-Z_]+: [0-9]' | awk '{print $2}' | tail -1)")
      done
      record "$label" req/s higher "${vals[0]}" "${vals[1]}"
    done
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
    cost "nginx 64 KiB file, wrk -c10" $mode "$(awk '/requests in/ {print $1}' "$work/wrk.$mode")"
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
  # kernel TCP (uid_mismatch) unless both ends list each other in
  # VSOCKET_SHARE_UIDS.
  local user
  for user in root nobody; do
    local vals=()
    for mode in plain vsocket; do
      local port; port=$(free_port)
      run_server $mode memcached -l 127.0.0.1 -p "$port" -U 0 -u "$user"
      wait_port "$port"
      client $mode memcaslap -s "127.0.0.1:$port" -T 1 -c 16 -t "${seconds}s" >"$work/memc.$mode" 2>&1 || true
      cost "memcached -u $user, memaslap -c16" $mode "$(grep -oE 'Ops: [0-9]+' "$work/memc.$mode" | tail -1 | awk '{print $2}')"
      stop_servers
      vals+=("$(grep -oE 'TPS: [0-9]+' "$work/memc.$mode" | tail -1 | awk '{print $2}')")
    done
    record "memcached -u $user, memaslap -c16" ops/s higher "${vals[0]}" "${vals[1]}"
  done
}

# two_ranks MODE OUT CMD...: the two ranks of a torch job at once, CMD with
# @RANK@ replaced by 1 and 0; rank r's output goes to OUT.r. In the count
# pass each rank runs under perf stat with its events off until the rank's
# perf_window.counted() turns them on (benchmarks/apps/perf_window.py), so
# only the measured loop is counted, not importing torch or the rendezvous:
# rank 0's counts land where perf_total reads the client's, rank 1's the
# server's.
two_ranks() {
  local mode=$1 out=$2 r a status=0 rank_pids=()
  shift 2
  for r in 1 0; do
    local cmd=()
    for a in "$@"; do cmd+=("${a//@RANK@/$r}"); done
    if [[ $mode == vsocket ]]; then cmd=("$vrun" --stats --transport "$transport" -- "${cmd[@]}"); fi
    if [[ $pass == count ]]; then
      local file; file=$work/perf.$( ((r == 0)) && echo client || echo server)
      rm -f "$file" "$work/ctl.$r" "$work/ack.$r"
      mkfifo "$work/ctl.$r" "$work/ack.$r"
      cmd=(env VSOCKET_PERF_CTL="$work/ctl.$r" VSOCKET_PERF_ACK="$work/ack.$r"
           perf stat -x, -e "$perf_events" --delay -1 --control "fifo:$work/ctl.$r,$work/ack.$r"
           -o "$file" -- "${cmd[@]}")
    fi
    PYTHONPATH="$here" "${cmd[@]}" >"$out.$r" 2>&1 &
    rank_pids+=($!)
  done
  for a in "${rank_pids[@]}"; do wait "$a" || status=1; done
  return "$status"
}

bench_gloo() {
  # 1, 16 and 64 MiB float32, two ranks on 127.0.0.1; the rate pass runs
  # the three sizes in one pair of processes, the count pass one pair per
  # size (perf's window covers one timed loop).
  local sizes=(1 16 64) base=5 mode mib port
  local -A ms=()
  if [[ $pass == rate ]]; then
    for mode in plain vsocket; do
      port=$(free_port)
      two_ranks $mode "$work/gloo.$mode" /usr/bin/python3 "$here/gloo_allreduce.py" @RANK@ "$port" 1,16,64 $base || true
      for mib in "${sizes[@]}"; do
        ms[$mode.$mib]=$(grep -oE "allreduce_ms_$mib=[0-9.]+" "$work/gloo.$mode.0" | cut -d= -f2 || true)
      done
    done
    for mib in "${sizes[@]}"; do
      record "gloo all_reduce $mib MiB, 2 ranks" ms lower "${ms[plain.$mib]}" "${ms[vsocket.$mib]}"
    done
    return 0
  fi
  for mib in "${sizes[@]}"; do
    for mode in plain vsocket; do
      port=$(free_port)
      two_ranks $mode "$work/gloo.$mode" /usr/bin/python3 "$here/gloo_allreduce.py" @RANK@ "$port" "$mib" $base || true
      cost "gloo all_reduce $mib MiB, 2 ranks" $mode \
        "$(grep -oE 'iterations=[0-9]+' "$work/gloo.$mode.0" | cut -d= -f2 || true)"
    done
  done
}

bench_ddp() {
  # tests/apps/scripts/ddp_train.py: DistributedDataParallel (gloo) on a
  # 1 M-parameter MLP, 4 MiB of gradients all-reduced per step, two ranks on
  # 127.0.0.1, one thread each; the mean of 30 timed steps (after 2).
  local steps=32 vals=() mode port
  for mode in plain vsocket; do
    port=$(free_port)
    two_ranks $mode "$work/ddp.$mode" /usr/bin/python3 "$top/tests/apps/scripts/ddp_train.py" \
      @RANK@ 2 127.0.0.1 "$port" "$work/ddp.$mode.@RANK@.json" $steps || true
    cost "DDP training step, 2 ranks" $mode $((steps - 2))
    vals+=("$(/usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["step_ms_mean"])' \
      "$work/ddp.$mode.0.json" 2>/dev/null || true)")
  done
  record "DDP training step, 2 ranks" ms lower "${vals[0]}" "${vals[1]}"
}

names=(sockperf iperf3 redis nginx memcached gloo ddp)
if [[ -n $only ]]; then IFS=, read -r -a names <<<"$only"; fi
for name in "${names[@]}"; do
  declare -F "bench_$name" >/dev/null || { echo "unknown benchmark $name" >&2; exit 2; }
  echo "== $name" >&2
  pass=rate
  "bench_$name" || echo "$name failed" >&2
  if ((counts)); then
    echo "== $name (counted)" >&2
    pass=count
    "bench_$name" || echo "$name (counted) failed" >&2
  fi
done
echo "vsocket runs: VSOCKET_TRANSPORT=$transport, $( ((server_only)) && echo "server only (plain clients)" || echo "both ends")"
printf '%-34s %12s %12s %9s\n' "benchmark" "plain" "vsocket" "ratio"
printf '%s\n' "${results[@]}"
if ((counts)); then
  echo "system calls and CPU per message, client + server, from the counted pass:"
  for row in "${rows[@]}"; do
    IFS=$'\t' read -r name _ <<<"$row"
    printf '%-34s plain %s, vsocket %s (syscalls/msg CPU-us/msg)\n' "$name" \
      "${costs["$name|plain"]:-n/a}" "${costs["$name|vsocket"]:-n/a}"
  done
fi

if [[ -n $markdown ]]; then
  {
    echo "| program, client settings | plain | vsocket | vsocket vs plain | system calls per message, plain → vsocket | CPU µs per message, plain → vsocket |"
    echo "|---|---|---|---|---|---|"
    for row in "${rows[@]}"; do
      IFS=$'\t' read -r name unit better plain vs ratio <<<"$row"
      read -r sp cp <<<"${costs["$name|plain"]:-n/a n/a}"
      read -r sv cv <<<"${costs["$name|vsocket"]:-n/a n/a}"
      echo "| $name | $plain $unit | $vs $unit | **$ratio** ($better is better) | $sp → $sv | $cp → $cv |"
    done
  } >"$markdown"
fi
