#!/usr/bin/env bash
# The checks of smoke.sh, run inside the rdma_vm guest (by run-in-guest.sh):
#   rping        RDMA CM + SEND/RDMA READ/WRITE ping-pong (rdmacm-utils)
#   ib_write_bw  RDMA WRITE bandwidth (perftest)
#   ib_write_lat RDMA WRITE latency (perftest)
#   rstream      rsocket streaming benchmark (rdmacm-utils)
#   rs-preload   a plain blocking TCP program under rsocket's librspreload.so
#                (only when smoke.sh could compile it: TCP_STREAM_BENCH set)
# One guest (VSOCKET_RDMA_ROLE=single): server and client of each tool on the
# guest's own Soft-RoCE device rxe0. Two guests (--pair): guest a runs the
# servers, guest b the clients and the table.
# Prints a table; exits 0 only if rping passed and ib_write_bw/ib_write_lat
# produced figures (guest a: only if its servers all ended well). Logs go to
# $SMOKE_LOG_DIR (default: a guest temp dir).

set -uo pipefail   # no -e: every check runs and is reported

[[ ${VSOCKET_RDMA_GUEST:-} == 1 ]] || { echo "run me through run-in-guest.sh" >&2; exit 2; }

ROLE=$VSOCKET_RDMA_ROLE
SELF_IP=$VSOCKET_RDMA_SELF_IP
SERVER_IP=$VSOCKET_RDMA_SELF_IP           # where clients connect
[[ $ROLE == b ]] && SERVER_IP=$VSOCKET_RDMA_PEER_IP
DEV=$VSOCKET_RDMA_DEV
GID=$VSOCKET_RDMA_GID_INDEX
LOG_DIR=${SMOKE_LOG_DIR:-$(mktemp -d /tmp/rdma-smoke.XXXXXX)}
VERBOSE=${SMOKE_VERBOSE:-0}
mkdir -p "$LOG_DIR"

# Parameters of each check (also quoted in README.md).
RPING_COUNT=10
BW_ITERS=2000           # x 64 KiB (perftest's default size)
RSTREAM_SIZE=65536
RSTREAM_COUNT=1000
PRELOAD_MB=64
PRELOAD_PORT=7777
PRELOAD_LIB=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
SERVER_SECONDS=150      # bound on each server and each client run

declare -a NAMES=() RESULTS=() FIGURES=()
record() {   # NAME RESULT FIGURE
    NAMES+=("$1")
    RESULTS+=("$2")
    FIGURES+=("$3")
}

# Server on vCPU 0, client on vCPU 1: the tools busy-poll their completion
# queues, and when the scheduler puts both on one vCPU they take turns by
# time slice (ib_write_lat then reads milliseconds instead of ~18 us).
PIN_SERVER=() PIN_CLIENT=()
if [[ $ROLE == single ]] && (($(nproc) >= 2)); then
    PIN_SERVER=(taskset -c 0)
    PIN_CLIENT=(taskset -c 1)
fi

# Run CLIENT until it succeeds: up to TRIES tries 1 s apart (a client fails
# fast while its server is not listening yet), while CONDITION holds.
# Args: NAME TRIES CONDITION-PID(empty: none) CLIENT...
run_client() {
    local name=$1 tries=$2 server_pid=$3 status=1 try
    shift 3
    for ((try = 1; try <= tries; try++)); do
        timeout "$SERVER_SECONDS" "${PIN_CLIENT[@]}" "$@" >"$LOG_DIR/$name.client" 2>&1
        status=$?
        ((status == 0)) && break
        if [[ -n $server_pid ]] && ! kill -0 "$server_pid" 2>/dev/null; then
            break
        fi
        {
            echo "--- try $try failed (status $status), retrying"
            cat "$LOG_DIR/$name.client"
        } >>"$LOG_DIR/$name.client.retries"
        sleep 1
    done
    return "$status"
}

# One check's processes, by role:
#   single  SERVER in the background, then CLIENT (retried while the server
#           lives); the status is the client's.
#   a       SERVER only; its status.
#   b       CLIENT only, retried for up to 30 s while a starts its server.
# Every process is bounded by `timeout`.
# Args: NAME -- SERVER... -- CLIENT...   (logs: NAME.server, NAME.client)
run_server_client() {
    local name=$1
    shift 2
    local server=() client=() status=0
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")

    case $ROLE in
    single)
        timeout "$SERVER_SECONDS" "${PIN_SERVER[@]}" "${server[@]}" >"$LOG_DIR/$name.server" 2>&1 &
        local server_pid=$! waited=0
        sleep 1
        run_client "$name" 5 "$server_pid" "${client[@]}" || status=$?
        # The server ends with the client; bound the wait anyway.
        while kill -0 "$server_pid" 2>/dev/null && ((waited++ < 50)); do sleep 0.2; done
        kill "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
        ;;
    a)
        timeout "$SERVER_SECONDS" "${server[@]}" >"$LOG_DIR/$name.server" 2>&1 || status=$?
        ;;
    b)
        sleep 1
        run_client "$name" 30 "" "${client[@]}" || status=$?
        ;;
    esac
    if ((VERBOSE)) || ((status != 0)); then
        [[ $ROLE == a ]] || show_log "$name" client
        [[ $ROLE == b ]] || show_log "$name" server
    fi
    return "$status"
}

# Guest a records only how its servers ended. Args: NAME STATUS; returns 0
# when it recorded (the caller then stops), 1 when the caller goes on.
served() {
    [[ $ROLE == a ]] || return 1
    if (($2 == 0)); then
        record "$1" ok "server side done"
    else
        record "$1" FAIL "server exited with status $2"
    fi
}

show_log() {   # NAME SIDE
    echo "----- $1 $2 log (last 20 lines) -----"
    tail -n 20 "$LOG_DIR/$1.$2" 2>/dev/null
}

# The first line of numbers after perftest's "#bytes" header.
perftest_row() {
    awk '/#bytes/ { header = 1; next } header && $1 ~ /^[0-9]+$/ { print; exit }' "$1"
}

check_rping() {
    local pings status=0
    run_server_client rping -- rping -s -a "$SELF_IP" -C "$RPING_COUNT" -v \
                            -- rping -c -a "$SERVER_IP" -C "$RPING_COUNT" -v || status=$?
    served rping "$status" && return
    if ((status == 0)); then
        pings=$(grep -c 'ping data' "$LOG_DIR/rping.client")
        if ((pings == RPING_COUNT)); then
            record rping ok "$pings/$RPING_COUNT pings answered (RDMA CM, SEND, RDMA READ/WRITE)"
            return
        fi
        record rping FAIL "$pings/$RPING_COUNT pings"
    else
        record rping FAIL "client failed (see log above)"
    fi
}

# perftest derives its figures from the CPU clock rate, which it measures at
# start-up; under TCG on a busy host that measurement can fail ("Correlation
# coefficient r^2 < 0.9") and the figures come out as "inf". One guest reruns
# the server/client pair then (3 tries); in pair mode guest a could not know,
# so there is no rerun. Sets PERFTEST_ROW (the client's row of figures).
# Args: TOOL ARGS...   (the client also gets the server's address)
run_perftest() {
    local tool=$1 try status
    shift
    PERFTEST_ROW=
    for try in 1 2 3; do
        status=0
        run_server_client "$tool" -- "$tool" "$@" -- "$tool" "$@" "$SERVER_IP" || status=$?
        [[ $ROLE == a ]] && return "$status"
        PERFTEST_ROW=$(perftest_row "$LOG_DIR/$tool.client")
        finite_row "$PERFTEST_ROW" && return 0
        if ((status != 0)) || [[ $ROLE != single ]]; then
            break
        fi
        echo "$tool: no finite figures on try $try (perftest's clock calibration failed?)"
    done
    return 1
}

# True if ROW is a non-empty row of plain numbers.
finite_row() {
    [[ -n $1 ]] && awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9.]+$/) exit 1 }' <<<"$1"
}

check_write_bw() {
    local status=0
    run_perftest ib_write_bw -d "$DEV" -x "$GID" -F -n "$BW_ITERS" || status=$?
    served ib_write_bw "$status" && return
    if finite_row "$PERFTEST_ROW"; then
        # #bytes #iterations BW-peak BW-average MsgRate
        record ib_write_bw ok "$(awk '{ printf "%s MB/s average (peak %s), %s B x %s", $4, $3, $1, $2 }' <<<"$PERFTEST_ROW")"
    else
        record ib_write_bw FAIL "no figures${PERFTEST_ROW:+: $PERFTEST_ROW}"
    fi
}

check_write_lat() {
    local status=0
    run_perftest ib_write_lat -d "$DEV" -x "$GID" -F || status=$?
    served ib_write_lat "$status" && return
    if finite_row "$PERFTEST_ROW"; then
        # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
        record ib_write_lat ok "$(awk '{ printf "%s us typical, %s us average, %s us 99%%, %s B x %s", $5, $6, $8, $1, $2 }' <<<"$PERFTEST_ROW")"
    else
        record ib_write_lat FAIL "no figures${PERFTEST_ROW:+: $PERFTEST_ROW}"
    fi
}

check_rstream() {
    local row status=0
    run_server_client rstream -- rstream -b "$SELF_IP" -S "$RSTREAM_SIZE" -C "$RSTREAM_COUNT" \
                              -- rstream -s "$SERVER_IP" -S "$RSTREAM_SIZE" -C "$RSTREAM_COUNT" || status=$?
    served rstream "$status" && return
    # name bytes xfers iters total time Gb/sec usec/xfer
    row=$(awk '$1 == "custom" { print; exit }' "$LOG_DIR/rstream.client")
    if [[ -n $row ]]; then
        record rstream ok "$(awk '{ printf "%s Gb/s, %s us/xfer, %s x %s", $7, $8, $2, $3 }' <<<"$row")"
    else
        record rstream FAIL "no figures"
    fi
}

check_preload() {
    local bench=${TCP_STREAM_BENCH:-} mbps status=0
    if [[ -z $bench || ! -x $bench ]]; then
        record rs-preload skip "no compiled tcp_stream_bench (needs cc on the host)"
        return
    fi
    if [[ ! -f $PRELOAD_LIB ]]; then
        record rs-preload skip "no $PRELOAD_LIB"
        return
    fi
    run_server_client rs-preload \
        -- env LD_PRELOAD="$PRELOAD_LIB" "$bench" server "$PRELOAD_PORT" \
        -- env LD_PRELOAD="$PRELOAD_LIB" "$bench" client "$SERVER_IP" "$PRELOAD_PORT" "$PRELOAD_MB" || status=$?
    served rs-preload "$status" && return
    mbps=$(awk '$1 == "MB/s" { print $2 }' "$LOG_DIR/rs-preload.client")
    if [[ -n $mbps ]]; then
        record rs-preload ok "$mbps MB/s, blocking TCP program, $PRELOAD_MB MiB"
    else
        record rs-preload FAIL "no figures"
    fi
}

print_table() {
    local i
    echo
    printf '%-13s %-6s %s\n' check result figure
    printf '%-13s %-6s %s\n' ------------- ------ ------------------------------
    for i in "${!NAMES[@]}"; do
        printf '%-13s %-6s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${FIGURES[$i]}"
    done
    if [[ $ROLE == single ]]; then
        echo "(one guest: Soft-RoCE rxe0 on $SELF_IP to itself, kernel $(uname -r), $(nproc) vCPU; logs: $LOG_DIR)"
    else
        echo "(guest $ROLE, $SELF_IP; server $SERVER_IP; kernel $(uname -r), $(nproc) vCPU; logs: $LOG_DIR)"
    fi
}

result_of() {   # NAME -> ok|FAIL|skip
    local i
    for i in "${!NAMES[@]}"; do
        [[ ${NAMES[$i]} == "$1" ]] && { echo "${RESULTS[$i]}"; return; }
    done
    echo missing
}

main() {
    echo "rdma smoke ($ROLE): rxe0 on $SELF_IP, GID index $GID, servers on $SERVER_IP"
    check_rping
    check_write_bw
    check_write_lat
    check_rstream
    check_preload
    print_table
    # The gate: real RDMA works (rping) and perftest measured something
    # (guest a: its servers for those ended well).
    [[ $(result_of rping) == ok && $(result_of ib_write_bw) == ok && $(result_of ib_write_lat) == ok ]]
}

main
