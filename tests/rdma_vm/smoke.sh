#!/usr/bin/env bash
# Soft-RoCE smoke test: boots one rdma_vm guest (run-in-guest.sh) and runs
# rping, ib_write_bw, ib_write_lat, rstream and, when a C compiler is there,
# a plain TCP program under rsocket's preload library, printing a table of
# their figures. Exit 0 only if rping passed and ib_write_bw/ib_write_lat
# produced figures. See README.md.
#
#   tests/rdma_vm/smoke.sh [--pair] [--timeout S] [--logs DIR] [-v]
#     --pair       two guests: servers in guest a, clients in guest b
#     --timeout S  guest deadline (default 300; 420 with --pair)
#     --logs DIR   keep every tool's server/client log in host DIR
#     -v           print every tool's log, and the guest console

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TIMEOUT=
PAIR=0
LOGS=
VERBOSE=0

die() {
    echo "smoke: error: $*" >&2
    exit 125
}

parse_args() {
    while (($#)); do
        case $1 in
        --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
        --pair) PAIR=1; shift ;;
        --logs) LOGS=${2:?--logs needs a directory}; shift 2 ;;
        -v|--verbose) VERBOSE=1; shift ;;
        -h|--help) sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $1" ;;
        esac
    done
    if [[ -z $TIMEOUT ]]; then
        if ((PAIR)); then TIMEOUT=420; else TIMEOUT=300; fi
    fi
}

# Compile guest/tcp_stream_bench.c for the rsocket preload check, into
# BUILD_DIR (the guest sees the host's filesystem, so it runs from there).
# Without a compiler the check is skipped, not failed.
build_bench() {
    local cc
    cc=$(command -v cc || command -v gcc || true)
    if [[ -z $cc ]]; then
        echo "smoke: no C compiler; the rsocket preload check will be skipped" >&2
        return 0
    fi
    "$cc" -O2 -Wall -o "$BUILD_DIR/tcp_stream_bench" "$SCRIPT_DIR/guest/tcp_stream_bench.c" ||
        die "compiling tcp_stream_bench.c failed"
}

main() {
    parse_args "$@"
    BUILD_DIR=$(mktemp -d /tmp/rdma-smoke-build.XXXXXX)
    trap 'rm -rf "$BUILD_DIR"' EXIT
    build_bench

    local args=(--timeout "$TIMEOUT")
    if [[ -x $BUILD_DIR/tcp_stream_bench ]]; then
        args+=(--env "TCP_STREAM_BENCH=$BUILD_DIR/tcp_stream_bench")
    fi
    if [[ -n $LOGS ]]; then
        mkdir -p "$LOGS"
        LOGS=$(realpath "$LOGS")
        args+=(--writable "$LOGS" --env "SMOKE_LOG_DIR=$LOGS")
    fi
    ((VERBOSE)) && args+=(-v --env SMOKE_VERBOSE=1)

    echo "smoke: host load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) host cores)"
    # Not exec: the EXIT trap must still remove BUILD_DIR.
    local status=0 checks
    checks=$(printf 'bash %q' "$SCRIPT_DIR/guest/smoke-checks.sh")
    if ((PAIR)); then
        "$SCRIPT_DIR/run-in-guest.sh" "${args[@]}" --pair "$checks" "$checks" || status=$?
    else
        "$SCRIPT_DIR/run-in-guest.sh" "${args[@]}" -- bash "$SCRIPT_DIR/guest/smoke-checks.sh" || status=$?
    fi
    echo "smoke: host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    if ((status == 0)); then
        echo "smoke: PASS"
    else
        echo "smoke: FAIL (status $status)"
    fi
    return "$status"
}

main "$@"
