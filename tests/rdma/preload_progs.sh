#!/bin/bash
# Runs inside the Soft-RoCE guest (tests/rdma/run-suite.sh): the interposer's
# one-feature programs whose kernel-TCP runs on the host are the reference
# (tests/preload/progs/), on RDMA connections under vsocket-run --transport
# rdma; the statistics must show RDMA connections only, as many as stated.
#   hangup       POLLRDHUP / POLLHUP / EPOLLRDHUP / edge-triggered RDHUP
#                after shutdown, close, reset (its forked-peer case is
#                skipped: a forked child's copy of an RDMA connection is
#                unusable, docs/COMPATIBILITY.md)          12 connections
#   closed_peer  one send succeeds after the peer's close, its last bytes
#                and end of stream are read, then EPIPE     4 connections
#   tests/rdma/preload_progs.sh BUILD_DIR
set -euo pipefail
build="$1"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed=0
for entry in hangup:12 closed_peer:4; do
  name=${entry%%:*} want=${entry##*:}
  prog="$build/tests/preload/progs/$name"
  [[ -x $prog ]] || { echo "FAIL: $prog not built"; failed=1; continue; }
  status=0
  PTEST_IP="$ip" PTEST_NO_FORKED_PEER=1 \
    "$build/preload/vsocket-run" --transport rdma --stats -- "$prog" >"$log" 2>&1 || status=$?
  sed 's/^/  /' "$log"
  stats="$(grep '^{"pid"' "$log" | tail -1)"
  if ((status != 0)) || ! grep -q '^PASS$' "$log"; then
    echo "FAIL $name: exited $status"; failed=1; continue
  fi
  if [[ $stats != *"\"rdma\":{\"connections\":$want,"* || $stats == *'"tcp"'* ]]; then
    echo "FAIL $name: expected $want RDMA connections and no TCP: $stats"; failed=1; continue
  fi
  echo "PASS $name"
done
((failed == 0)) || exit 1
echo "PASS preload_progs"
