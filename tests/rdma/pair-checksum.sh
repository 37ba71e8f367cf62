#!/usr/bin/env bash
# Two-guest end-to-end test of RdmaChannel: server in guest a, client in
# guest b (tests/rdma_vm/run-in-guest.sh --pair: two QEMU guests, one vCPU
# each, Soft-RoCE over an emulated Ethernet link).  The host writes
# VSOCKET_RDMA_PAIR_MB (default 32) MiB of random data; guest b sends it
# with `rdma_channel_bench send-file`, guest a receives it with
# `rdma_channel_bench recv-file | sha256sum`; the host compares that
# SHA-256 with its own sum of the file.
#
#   tests/rdma/pair-checksum.sh BUILD_DIR
#
# Needs: root, BUILD_DIR/benchmarks/rdma_channel_bench built (rdma-core
# present), what run-in-guest.sh needs.  Environment: VSOCKET_RDMA_PAIR_MB,
# VSOCKET_RDMA_PAIR_TIMEOUT (guest deadline, default 420 s).
# Exit status: 0 sums match; 1 mismatch or a side failed; 2 usage;
# 124 guest deadline; 125 harness failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if (($# != 1)) || [[ $1 == -* ]]; then
  sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
bench=$(cd "$1" && pwd)/benchmarks/rdma_channel_bench
[[ -x $bench ]] || { echo "pair-checksum: $bench not built" >&2; exit 2; }
mb=${VSOCKET_RDMA_PAIR_MB:-32}
port=7471

work=$(mktemp -d /tmp/rdma-pair.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/out"
head -c "$((mb << 20))" /dev/urandom >"$work/data"
want=$(sha256sum "$work/data" | cut -d' ' -f1)

# The commands run under bash -c in the guests: $VSOCKET_RDMA_* expand there.
# shellcheck disable=SC2016
# Guest a: receive everything, hash it, leave the hash in the writable dir.
cmd_a=$(printf 'set -o pipefail; timeout 300 %q recv-file "$VSOCKET_RDMA_SELF_IP" %d | sha256sum | cut -d" " -f1 >%q' \
  "$bench" "$port" "$work/out/a.sha256")
# shellcheck disable=SC2016
# Guest b: send the host's file (the guest sees the host's / read-only).
cmd_b=$(printf 'timeout 300 %q send-file "$VSOCKET_RDMA_PEER_IP" %d %q' \
  "$bench" "$port" "$work/data")

echo "pair-checksum: $mb MiB guest b -> guest a over RdmaChannel, SHA-256 $want"
status=0
"$repo/tests/rdma_vm/run-in-guest.sh" --timeout "${VSOCKET_RDMA_PAIR_TIMEOUT:-420}" \
  --writable "$work/out" --pair "$cmd_a" "$cmd_b" || status=$?
if ((status != 0)); then
  echo "pair-checksum: FAIL: guests ended with status $status" >&2
  exit "$status"
fi
got=$(cat "$work/out/a.sha256" 2>/dev/null || true)
if [[ $got != "$want" ]]; then
  echo "pair-checksum: FAIL: guest a received SHA-256 '${got:-nothing}', sent $want" >&2
  exit 1
fi
echo "pair-checksum: PASS: SHA-256 matches end to end ($mb MiB)"
