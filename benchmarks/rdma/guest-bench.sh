#!/usr/bin/env bash
# In-guest half of benchmarks/rdma/run.sh (started by tests/rdma_vm/
# run-in-guest.sh; refuses to run elsewhere).  In ONE guest, one after the
# other, server pinned to vCPU 0 and client to vCPU 1:
#   perftest   ib_write_bw -x 1 (64 KiB, 1 MiB), ib_write_lat -x 1 -s 64:
#              the Soft-RoCE device's own limit; ib_send_lat -x 1 -s 64 as
#              a second reference (a receive completion per message, as
#              RdmaChannel's WRITE WITH IMMEDIATE needs; ib_write_lat polls
#              memory instead)
#   rsocket    rstream (rdma-core's rsocket benchmark): 64 KiB / 1 MiB
#              streaming, 64 B ping-pong
#   kernel TCP rstream -T s (same benchmark over plain sockets, guest loopback)
#   vsocket    rdma_channel_bench: RdmaChannel stream 64 KiB / 1 MiB (copy
#              and zero-copy SendRegistered / SendRegisteredAsync), 64 B
#              ping-pong; twice: with
#              default ChannelOptions (plus RDMA_BENCH_CHANNEL_OPTS) and
#              tuned (RDMA_BENCH_TUNED_OPTS, default --spin-ns 2000000)
#   sockets    vsocket-bench --local --transports rdma: the public API over
#              RdmaTransport, 64 KiB / 1 MiB streaming and 64 B ping-pong,
#              at the default VSOCKET_SPIN_US and at
#              RDMA_BENCH_SOCKET_TUNED_SPIN_US (default 2000); streaming
#              once more with --zerocopy (vsocket_send_registered from a
#              registered buffer, vsocket_recv_inplace)
# and writes OUT/results.md (markdown table with ratios), OUT/results.env
# (raw figures) and OUT/logs/*.
#
# Environment (set by run.sh): RDMA_BENCH_OUT (writable host dir),
# RDMA_BENCH_BUILD (build dir with benchmarks/rdma_channel_bench),
# RDMA_BENCH_CHANNEL_OPTS (extra rdma_channel_bench options, both sides),
# RDMA_BENCH_TUNED_OPTS (options of the second, tuned run; "none": no such run),
# RDMA_BENCH_MIB (MiB per streaming test, default 64), RDMA_BENCH_PINGS
# (round trips per latency test, default 2000), RDMA_BENCH_SOCKET_TUNED_SPIN_US.
# Exit status: 0 if every measurement produced a figure, 1 otherwise (the
# table is written either way, with "n/a" for what failed).

set -uo pipefail   # no -e: every measurement runs and is reported

[[ ${VSOCKET_RDMA_GUEST:-} == 1 ]] || { echo "run me through benchmarks/rdma/run.sh" >&2; exit 2; }

OUT=${RDMA_BENCH_OUT:?}
BUILD=${RDMA_BENCH_BUILD:?}
read -r -a CH_OPTS <<<"${RDMA_BENCH_CHANNEL_OPTS:-}"
# Under TCG one 64 B round trip takes 70+ us, far above the default 20 us
# CQ spin budget, so every wait ends in the completion channel (an
# interrupt and a wakeup: milliseconds here).  The tuned run spins longer.
TUNED=${RDMA_BENCH_TUNED_OPTS:---spin-ns 2000000}
read -r -a TU_OPTS <<<"$TUNED"
MIB=${RDMA_BENCH_MIB:-64}
PINGS=${RDMA_BENCH_PINGS:-2000}
IP=$VSOCKET_RDMA_SELF_IP
DEV=$VSOCKET_RDMA_DEV
GID=$VSOCKET_RDMA_GID_INDEX
LOGS=$OUT/logs
mkdir -p "$LOGS"
: >"$OUT/results.env"
FAILED=0

PIN_SERVER=(taskset -c 0)
PIN_CLIENT=(taskset -c 1)
if (($(nproc) < 2)); then PIN_SERVER=(); PIN_CLIENT=(); fi

# Progress to stderr: stdout of helpers is captured as figures.
note() { echo "rdma-bench: $*" >&2; }
put() { echo "$1=$2" >>"$OUT/results.env"; eval "$1=\$2"; }

# Server in the background, client in the foreground (retried while the
# server is not listening yet), both bounded.  Args: NAME -- SERVER... -- CLIENT...
pair() {
    local name=$1 server=() client=() status=0 try spid
    shift 2
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    timeout 300 "${PIN_SERVER[@]}" "${server[@]}" >"$LOGS/$name.server" 2>&1 &
    spid=$!
    sleep 1
    for try in 1 2 3 4 5; do
        status=0
        timeout 300 "${PIN_CLIENT[@]}" "${client[@]}" >"$LOGS/$name.client" 2>&1 || status=$?
        ((status == 0)) && break
        kill -0 "$spid" 2>/dev/null || break
        cp "$LOGS/$name.client" "$LOGS/$name.client.try$try"
        sleep 1
    done
    local waited=0
    while kill -0 "$spid" 2>/dev/null && ((waited++ < 50)); do sleep 0.2; done
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    if ((status != 0)); then
        note "$name: client failed (status $status); last lines:"
        tail -n 5 "$LOGS/$name.client" "$LOGS/$name.server" | sed 's/^/    /' >&2
    fi
    return "$status"
}

# perftest's first row of plain numbers after the "#bytes" header; empty if
# the figures are not finite (its CPU clock calibration fails under TCG on a
# busy host, then it prints inf: rerun, up to 3 tries).  Args: NAME TOOL ARGS...
perftest_row() {
    local name=$1 tool=$2 row try
    shift 2
    for try in 1 2 3; do
        pair "$name" -- "$tool" "$@" -- "$tool" "$@" "$IP" || true
        row=$(awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ { print; exit }' "$LOGS/$name.client")
        if [[ -n $row ]] && awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9.]+$/) exit 1 }' <<<"$row"; then
            echo "$row"
            return 0
        fi
        note "$name: no finite figures on try $try"
    done
    return 1
}

# --- the device: perftest -------------------------------------------------------
run_perftest() {
    local row
    # #bytes #iterations BW-peak BW-average[MB/sec] MsgRate; perftest's
    # MB is 2^20 bytes (format_factor 0x100000), i.e. MiB/s like ours.
    if row=$(perftest_row ib_write_bw_64k ib_write_bw -d "$DEV" -x "$GID" -F -s 65536 -n $((MIB * 16))); then
        put IBBW_64K "$(awk '{ print $4 }' <<<"$row")"
    else put IBBW_64K n/a; FAILED=1; fi
    if row=$(perftest_row ib_write_bw_1m ib_write_bw -d "$DEV" -x "$GID" -F -s 1048576 -n "$MIB"); then
        put IBBW_1M "$(awk '{ print $4 }' <<<"$row")"
    else put IBBW_1M n/a; FAILED=1; fi
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%  (one-way, us)
    if row=$(perftest_row ib_write_lat_64 ib_write_lat -d "$DEV" -x "$GID" -F -s 64 -n "$PINGS"); then
        put IBLAT_P50 "$(awk '{ print $5 }' <<<"$row")"
        put IBLAT_AVG "$(awk '{ print $6 }' <<<"$row")"
        put IBLAT_P99 "$(awk '{ print $8 }' <<<"$row")"
    else put IBLAT_P50 n/a; put IBLAT_AVG n/a; put IBLAT_P99 n/a; FAILED=1; fi
    if row=$(perftest_row ib_send_lat_64 ib_send_lat -d "$DEV" -x "$GID" -F -s 64 -n "$PINGS"); then
        put SENDLAT_P50 "$(awk '{ print $5 }' <<<"$row")"
        put SENDLAT_AVG "$(awk '{ print $6 }' <<<"$row")"
        put SENDLAT_P99 "$(awk '{ print $8 }' <<<"$row")"
    else put SENDLAT_P50 n/a; put SENDLAT_AVG n/a; put SENDLAT_P99 n/a; FAILED=1; fi
}

# --- rstream: rsocket (default) or kernel TCP (-T s) ------------------------------
# rstream's client sends COUNT x SIZE, then the server sends them back; it
# reports usec/xfer = total time / (2 x COUNT x ITERS): the average one-way
# time of a message (its Gb/s column has 2 decimals only, too coarse here).
# Throughput in MiB/s = SIZE / usec-per-xfer.
# Args: PREFIX(RS|TCP) EXTRA-OPTION...
run_rstream() {
    local p=$1 row
    shift
    local -a extra=("$@")
    rstream_fig() {   # NAME SIZE COUNT ITERS -> "MiB/s usec/xfer"
        pair "$1" -- rstream "${extra[@]}" -b "$IP" -S "$2" -C "$3" -I "$4" \
                  -- rstream "${extra[@]}" -s "$IP" -S "$2" -C "$3" -I "$4" || return 1
        awk -v size="$2" '$1 == "custom" && $8 > 0 { printf "%.2f %s\n", size / $8 / 1.048576, $8; f = 1; exit }
                          END { exit !f }' "$LOGS/$1.client"
    }
    if row=$(rstream_fig "${p,,}_64k" 65536 $((MIB * 16)) 1); then
        put "${p}_64K" "${row% *}"
    else put "${p}_64K" n/a; FAILED=1; fi
    if row=$(rstream_fig "${p,,}_1m" 1048576 "$MIB" 1); then
        put "${p}_1M" "${row% *}"
    else put "${p}_1M" n/a; FAILED=1; fi
    if row=$(rstream_fig "${p,,}_lat64" 64 1 "$PINGS"); then
        put "${p}_LAT_AVG" "${row#* }"
    else put "${p}_LAT_AVG" n/a; FAILED=1; fi
}

# --- vsocket: RdmaChannel ------------------------------------------------------------
# Args: PREFIX(CH|TU) LOGNAME PORT OPTION...
run_channel() {
    local p=$1 name=$2 port=$3 bench=$BUILD/benchmarks/rdma_channel_bench
    shift 3
    local log=$LOGS/$name.client
    if [[ ! -x $bench ]]; then
        note "no $bench"
        FAILED=1
    else
        pair "$name" -- "$bench" server "$IP" "$port" "$@" \
             -- "$bench" client "$IP" "$port" "$@" \
                stream:65536:"$MIB" stream:1048576:"$MIB" \
                zcopy:65536:"$MIB" zcopy:1048576:"$MIB" \
                zcasync:65536:"$MIB" zcasync:1048576:"$MIB" pingpong:64:"$PINGS" || FAILED=1
    fi
    field() {   # KIND SIZE KEY
        awk -v k="$1" -v s="size=$2" -v key="$3" '
            $1 == "RESULT" && $2 == k && $3 == s {
                for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) { print kv[2]; exit } } }' "$log" 2>/dev/null
    }
    local v k var kind size key
    for k in "64K stream 65536 mibps" "1M stream 1048576 mibps" \
             "ZC_64K zcopy 65536 mibps" "ZC_1M zcopy 1048576 mibps" \
             "ZA_64K zcasync 65536 mibps" "ZA_1M zcasync 1048576 mibps" \
             "RTT_P50 pingpong 64 rtt_p50_us" "RTT_P99 pingpong 64 rtt_p99_us" \
             "RTT_AVG pingpong 64 rtt_avg_us"; do
        read -r var kind size key <<<"$k"
        v=$(field "$kind" "$size" "$key")
        put "${p}_$var" "${v:-n/a}"
        [[ -n $v ]] || FAILED=1
    done
    put "${p}_CONFIG" "$(grep -m1 '^client: connected' "$log" 2>/dev/null | sed 's/^client: connected; //')"
}

# --- vsocket sockets over the RDMA transport (the public API) --------------------------
# vsocket-bench --local with VSOCKET_TRANSPORT=rdma: a server and a client
# process on this guest talk through vsocket_send/vsocket_recv over the
# RdmaTransport (readiness socket, progress thread and all), once with the
# default busy-poll budget and once with RDMA_BENCH_SOCKET_TUNED_SPIN_US
# (default 2000 µs: longer than this device's worst wake-ups).  Stream
# figures become MiB/s, ping-pong p50/avg/p99 RTTs one-way µs (RTT/2).
SOCKET_TUNED_SPIN_US=${RDMA_BENCH_SOCKET_TUNED_SPIN_US:-2000}
vb_fig() {   # JSON MODE SIZE FIELD -> the value, or nothing
    python3 - "$@" <<'PY'
import json, sys
path, mode, size, field = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    results = json.load(open(path))["results"]
except Exception:
    sys.exit(0)
for r in results:
    if (r.get("actual_transport") == "rdma" and r.get("mode") == mode and
            r.get("msg_size") == size and r.get("status") == "ok"):
        v = r[field]
        if field == "gb_per_s":
            v = v * 1e9 / 2**20          # GB/s (1e9) -> MiB/s
        elif field.startswith("latency_"):
            v = v / 2                    # RTT -> one-way
        print(f"{v:.2f}")
        break
PY
}
# Args: PREFIX NAME MODES FLAGS [ENV...]: runs vsocket-bench (MODES e.g.
# pingpong,stream; FLAGS e.g. --zerocopy or ""), puts PREFIX_64K, _1M,
# _LAT_P50, _LAT_AVG, _LAT_P99.
run_vsocket_bench_rdma() {
    local p=$1 name=$2 modes=$3 flags=$4 vb=$BUILD/benchmarks/vsocket-bench
    shift 4
    [[ -x $vb ]] || { note "vsocket-bench not built: socket-level RDMA not measured"; FAILED=1; return 0; }
    # RDMA needs an address of rxe0's netdev (127.0.0.1 has no RDMA device).
    if timeout 600 env "$@" "$vb" --local --address "$VSOCKET_RDMA_SELF_IP" \
           --transports rdma --sizes 64,64K,1M --mode "$modes" $flags \
           --duration-ms 2000 --json "$LOGS/$name.json" >"$LOGS/$name.log" 2>&1; then
        cat "$LOGS/$name.log" >&2
    else
        FAILED=1
        tail -n 20 "$LOGS/$name.log" >&2
    fi
    put "${p}_64K" "$(vb_fig "$LOGS/$name.json" stream 65536 gb_per_s)"
    put "${p}_1M" "$(vb_fig "$LOGS/$name.json" stream 1048576 gb_per_s)"
    put "${p}_LAT_P50" "$(vb_fig "$LOGS/$name.json" pingpong 64 latency_p50_us)"
    put "${p}_LAT_AVG" "$(vb_fig "$LOGS/$name.json" pingpong 64 latency_mean_us)"
    put "${p}_LAT_P99" "$(vb_fig "$LOGS/$name.json" pingpong 64 latency_p99_us)"
}

# --- table -------------------------------------------------------------------------------
ratio() {   # A B -> A/B with 2 decimals, or n/a
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else printf "n/a" }'
}
half() {    # X -> X/2, or n/a
    awk -v a="$1" 'BEGIN { if (a ~ /^[0-9.]+$/) printf "%.2f", a / 2; else printf "n/a" }'
}
verdict() { # VALUE OP LIMIT
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN { if (v !~ /^[0-9.]+$/) print "n/a";
        else if ((op == ">=" && v >= l) || (op == "<=" && v <= l)) print "yes"; else print "**no**" }'
}

# One RdmaChannel row of the figures table.  Args: PREFIX LABEL
channel_rows() {
    local p=$1 label=$2 v
    v() { eval "echo \"\${${p}_$1:-n/a}\""; }
    echo "| vsocket RdmaChannel Send (copy), $label | $(v 64K) | $(v 1M) | $(half "$(v RTT_P50)") median (avg $(half "$(v RTT_AVG)"), p99 $(half "$(v RTT_P99)")) = RTT/2 |"
    echo "| vsocket RdmaChannel SendRegistered (zero copy, waits per call), $label | $(v ZC_64K) | $(v ZC_1M) | |"
    echo "| vsocket RdmaChannel SendRegisteredAsync (zero copy, overlapped), $label | $(v ZA_64K) | $(v ZA_1M) | |"
}

# The ratio rows of one RdmaChannel configuration.  Args: PREFIX LABEL
ratio_rows() {
    local p=$1 label=$2 v r64 r1m lat
    v() { eval "echo \"\${${p}_$1:-n/a}\""; }
    r64=$(ratio "$(v 64K)" "$IBBW_64K"); r1m=$(ratio "$(v 1M)" "$IBBW_1M")
    lat=$(ratio "$(half "$(v RTT_P50)")" "$IBLAT_P50")
    echo "| $label: vsocket / ib_write_bw throughput | $r64 | $r1m | ≥ 0.80 | $(verdict "$r64" '>=' 0.8) / $(verdict "$r1m" '>=' 0.8) |"
    echo "| $label: vsocket zero-copy (sync / async) / ib_write_bw | $(ratio "$(v ZC_64K)" "$IBBW_64K") / $(ratio "$(v ZA_64K)" "$IBBW_64K") | $(ratio "$(v ZC_1M)" "$IBBW_1M") / $(ratio "$(v ZA_1M)" "$IBBW_1M") | | |"
    echo "| $label: vsocket / rsocket throughput | $(ratio "$(v 64K)" "$RS_64K") | $(ratio "$(v 1M)" "$RS_1M") | | |"
    echo "| $label: vsocket / kernel TCP throughput | $(ratio "$(v 64K)" "$TCP_64K") | $(ratio "$(v 1M)" "$TCP_1M") | | |"
    echo "| $label: vsocket 64 B latency / ib_write_lat (medians) | $lat | | ≤ 2 | $(verdict "$lat" '<=' 2) |"
    echo "| $label: vsocket 64 B latency / ib_send_lat (medians) | $(ratio "$(half "$(v RTT_P50)")" "$SENDLAT_P50") | | | |"
    echo "| $label: vsocket 64 B latency / rsocket (averages) | $(ratio "$(half "$(v RTT_AVG)")" "$RS_LAT_AVG") | | | |"
    echo "| $label: vsocket 64 B latency / kernel TCP (averages) | $(ratio "$(half "$(v RTT_AVG)")" "$TCP_LAT_AVG") | | | |"
}

# The socket-level rows.  Args: PREFIX LABEL
socket_rows() {
    local p=$1 label=$2 v
    v() { eval "echo \"\${${p}_$1:-n/a}\""; }
    local lat=""
    [[ $(v LAT_P50) == n/a ]] || lat="$(v LAT_P50) median (avg $(v LAT_AVG), p99 $(v LAT_P99)) = RTT/2"
    echo "| **vsocket sockets over RDMA** (vsocket-bench, \`VSOCKET_TRANSPORT=rdma\`), $label | $(v 64K) | $(v 1M) | $lat |"
}
socket_ratio_rows() {   # PREFIX LABEL [stream: no latency rows]
    local p=$1 label=$2 only=${3:-} v r64 r1m lat
    v() { eval "echo \"\${${p}_$1:-n/a}\""; }
    r64=$(ratio "$(v 64K)" "$IBBW_64K"); r1m=$(ratio "$(v 1M)" "$IBBW_1M")
    lat=$(ratio "$(v LAT_P50)" "$IBLAT_P50")
    local s64 s1m
    s64=$(ratio "$(v 64K)" "$RS_64K"); s1m=$(ratio "$(v 1M)" "$RS_1M")
    echo "| sockets, $label: vsocket / ib_write_bw throughput | $r64 | $r1m | ≥ 0.80 | $(verdict "$r64" '>=' 0.8) / $(verdict "$r1m" '>=' 0.8) |"
    echo "| sockets, $label: vsocket / rsocket throughput | $s64 | $s1m | ≥ 1 | $(verdict "$s64" '>=' 1) / $(verdict "$s1m" '>=' 1) |"
    echo "| sockets, $label: vsocket / kernel TCP throughput | $(ratio "$(v 64K)" "$TCP_64K") | $(ratio "$(v 1M)" "$TCP_1M") | | |"
    [[ $only == stream ]] && return 0
    echo "| sockets, $label: vsocket 64 B latency / ib_write_lat (medians) | $lat | | ≤ 2 | $(verdict "$lat" '<=' 2) |"
    echo "| sockets, $label: vsocket 64 B latency / rsocket (averages) | $(ratio "$(v LAT_AVG)" "$RS_LAT_AVG") | | | |"
    echo "| sockets, $label: vsocket 64 B latency / kernel TCP (averages) | $(ratio "$(v LAT_AVG)" "$TCP_LAT_AVG") | | | |"
}

write_table() {
    local tuned_label="tuned ($TUNED)"
    {
        echo "Soft-RoCE guest ($(nproc) vCPU, TCG, kernel $(uname -r)), $(date -u '+%Y-%m-%d %H:%M UTC'); server vCPU 0, client vCPU 1; $MIB MiB per stream test, $PINGS round trips per latency test. Throughput in MiB/s (2^20 B/s; perftest's \"MB/sec\" is the same unit)."
        echo
        echo "| path | stream 64 KiB, MiB/s | stream 1 MiB, MiB/s | 64 B one-way latency, µs |"
        echo "|---|---|---|---|"
        echo "| ib_write_bw / ib_write_lat (perftest, -x 1) | $IBBW_64K | $IBBW_1M | $IBLAT_P50 median (avg $IBLAT_AVG, p99 $IBLAT_P99) |"
        echo "| ib_send_lat (perftest, -x 1) | | | $SENDLAT_P50 median (avg $SENDLAT_AVG, p99 $SENDLAT_P99) |"
        echo "| rsocket (rstream) | $RS_64K | $RS_1M | $RS_LAT_AVG avg |"
        channel_rows CH default
        [[ $TUNED == none ]] || channel_rows TU "$tuned_label"
        socket_rows VB "default spin (VSOCKET_SPIN_US ${VSOCKET_SPIN_US:-200})"
        socket_rows VT "VSOCKET_SPIN_US=$SOCKET_TUNED_SPIN_US"
        socket_rows VZ "zero-copy calls (--zerocopy), default spin"
        echo "| kernel TCP, guest loopback (rstream -T s) | $TCP_64K | $TCP_1M | $TCP_LAT_AVG avg |"
        echo
        echo "| ratio (same run) | 64 KiB | 1 MiB | target | met? |"
        echo "|---|---|---|---|---|"
        ratio_rows CH default
        [[ $TUNED == none ]] || ratio_rows TU tuned
        socket_ratio_rows VB "default spin"
        socket_ratio_rows VT "spin $SOCKET_TUNED_SPIN_US µs"
        socket_ratio_rows VZ "zero-copy" stream
        echo
        echo "RdmaChannel, default: ${CH_CONFIG:-?}${RDMA_BENCH_CHANNEL_OPTS:+ (options: $RDMA_BENCH_CHANNEL_OPTS)}"
        [[ $TUNED == none ]] || echo "RdmaChannel, tuned: ${TU_CONFIG:-?} (options: $TUNED)"
        echo "Sockets over RDMA: build/benchmarks/vsocket-bench --local --address $IP --transports rdma (logs/vsocket_bench_rdma*.log, .json)."
    } >"$OUT/results.md"
}

main() {
    note "Soft-RoCE $DEV on $IP, $(nproc) vCPU; logs in $LOGS"
    note "perftest (device limit)";    run_perftest
    note "rstream (rsocket)";          run_rstream RS
    note "rstream -T s (kernel TCP)";  run_rstream TCP -T s
    note "rdma_channel_bench (vsocket RdmaChannel), default options"
    run_channel CH rdma_channel 7480 "${CH_OPTS[@]}"
    if [[ $TUNED != none ]]; then
        note "rdma_channel_bench (vsocket RdmaChannel), tuned: $TUNED"
        run_channel TU rdma_channel_tuned 7481 "${CH_OPTS[@]}" "${TU_OPTS[@]}"
    fi
    note "vsocket-bench --transports rdma (sockets over the RDMA transport), default spin"
    run_vsocket_bench_rdma VB vsocket_bench_rdma pingpong,stream ""
    note "vsocket-bench --transports rdma, VSOCKET_SPIN_US=$SOCKET_TUNED_SPIN_US"
    run_vsocket_bench_rdma VT vsocket_bench_rdma_spin pingpong,stream "" \
        VSOCKET_SPIN_US="$SOCKET_TUNED_SPIN_US"
    note "vsocket-bench --transports rdma --zerocopy (registered sends, in-place reads)"
    run_vsocket_bench_rdma VZ vsocket_bench_rdma_zc stream --zerocopy
    write_table
    echo
    cat "$OUT/results.md"
    return "$FAILED"
}

main
