#!/bin/bash
# Runs inside the Soft-RoCE guest (tests/rdma/run-suite.sh): the interposer's
# end-of-stream readiness program (tests/preload/progs/hangup.c: POLLRDHUP /
# POLLHUP / EPOLLRDHUP / edge-triggered RDHUP after shutdown, close, reset)
# on RDMA connections, under vsocket-run --transport rdma; the program's
# kernel-TCP run on the host is the reference.  Its forked-peer case is
# skipped: a forked child's copy of an RDMA connection is unusable
# (docs/COMPATIBILITY.md).  The statistics must show RDMA connections only.
#   tests/rdma/preload_hangup.sh BUILD_DIR
set -euo pipefail
build="$1"
prog="$build/tests/preload/progs/hangup"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
[[ -x $prog ]] || { echo "FAIL: $prog not built"; exit 1; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
PTEST_IP="$ip" PTEST_NO_FORKED_PEER=1 \
  "$build/preload/vsocket-run" --transport rdma --stats -- "$prog" >"$log" 2>&1 || status=$?
sed 's/^/  /' "$log"
stats="$(grep '^{"pid"' "$log" | tail -1)"
if ((status != 0)) || ! grep -q '^PASS$' "$log"; then
  echo "FAIL: hangup exited $status"; exit 1
fi
if [[ $stats != *'"rdma":{"connections":12'* || $stats == *'"tcp"'* ]]; then
  echo "FAIL: expected 12 RDMA connections (6 scenarios x 2 ends) and no TCP: $stats"; exit 1
fi
echo "PASS preload_hangup"
