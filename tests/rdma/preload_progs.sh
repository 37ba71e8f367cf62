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
#   epoll_modes  lt / et / oneshot / exclusive on a set mixing the
#                connection with a pipe, an eventfd and a socketpair;
#   poll_mix     poll over the connection beside a pipe (not select: its
#                check that the peer's byte is readable the moment write()
#                returned holds on loopback TCP only, not across a network);
#   epoll_wait_spin  timeouts, EINTR and sigmask while epoll_wait busy-polls:
#                the interposed waits read the connection's completion
#                queue themselves (rdma_transport.h, "User-space
#                readiness")                          2 connections each
#   cork         TCP_CORK and MSG_MORE hold bytes until the cork is out, a
#                send without MSG_MORE, TCP_NODELAY, shutdown, or ~200 ms;
#                its "OBS" lines must equal those of a plain kernel TCP run
#                in the guest.  PTEST_NO_FORKED_PEER makes its writer a
#                thread and skips the killed writer (held bytes are in the
#                writer's memory, docs/COMPATIBILITY.md)  12 connections
#   tests/rdma/preload_progs.sh BUILD_DIR
set -euo pipefail
build="$1"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
log="$(mktemp)" ref="$(mktemp)" obs_ref="$(mktemp)" obs="$(mktemp)"
trap 'rm -f "$log" "$ref" "$obs_ref" "$obs"' EXIT
# Programs whose observations are compared with kernel TCP's, line by line.
compared=" cork "
failed=0
# The probe gets 3 s: in the emulated guest beside a compiling host one took
# more than its 300 ms, and the connection went to TCP (docs/ROBUSTNESS.md).
export VSOCKET_RDMA_PROBE_MS=3000
# entry: PROGRAM[+ARGUMENT]:CONNECTIONS
for entry in hangup:12 closed_peer:4 epoll_modes+lt:2 epoll_modes+et:2 \
    epoll_modes+oneshot:2 epoll_modes+exclusive:2 poll_mix+poll:2 \
    epoll_wait_spin:2 cork:12; do
  name=${entry%%:*} want=${entry##*:}
  arg=""
  if [[ $name == *+* ]]; then arg=${name#*+}; name=${name%%+*}; fi
  prog="$build/tests/preload/progs/$name"
  [[ -x $prog ]] || { echo "FAIL: $prog not built"; failed=1; continue; }
  status=0
  PTEST_IP="$ip" PTEST_NO_FORKED_PEER=1 \
    "$build/preload/vsocket-run" --transport rdma --stats -- "$prog" ${arg:+"$arg"} >"$log" 2>&1 || status=$?
  sed 's/^/  /' "$log"
  stats="$(grep '^{"pid"' "$log" | tail -1)"
  if ((status != 0)) || ! grep -q '^PASS$' "$log"; then
    echo "FAIL $name $arg: exited $status"; failed=1; continue
  fi
  if [[ $stats != *"\"rdma\":{\"connections\":$want,"* || $stats == *'"tcp"'* ]]; then
    echo "FAIL $name $arg: expected $want RDMA connections and no TCP: $stats"; failed=1; continue
  fi
  if [[ $compared == *" $name "* ]]; then
    status=0
    PTEST_IP="$ip" PTEST_NO_FORKED_PEER=1 "$prog" ${arg:+"$arg"} >"$ref" 2>&1 || status=$?
    # (Files, not <(...): the guest has no /dev/fd.)
    grep '^OBS' "$ref" >"$obs_ref" || true
    grep '^OBS' "$log" >"$obs" || true
    if ((status != 0)) || ! diff "$obs_ref" "$obs"; then
      echo "FAIL $name $arg: observations differ from kernel TCP's (< kernel, > rdma)"
      sed 's/^/  kernel: /' "$ref"; failed=1; continue
    fi
  fi
  echo "PASS $name $arg"
done
((failed == 0)) || exit 1
echo "PASS preload_progs"
