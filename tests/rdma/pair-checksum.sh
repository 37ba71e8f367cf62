#!/usr/bin/env bash
# Two-guest end-to-end test: server in guest a, client in guest b
# (tests/rdma_vm/run-in-guest.sh --pair: two QEMU guests, one vCPU each,
# Soft-RoCE over an emulated Ethernet link).  The host writes
# VSOCKET_RDMA_PAIR_MB (default 32) MiB of random data, sent from guest b to
# guest a twice, and compares each received SHA-256 with its own:
#   1. the RDMA channel alone: `rdma_channel_bench send-file` / `recv-file`;
#   2. an unmodified program between two hosts: socat under vsocket-run with
#      the default policy (VSOCKET_TRANSPORT=auto), which must pick RDMA by
#      itself (both ends' VSOCKET_STATS must show one rdma connection).
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
vrun=$(cd "$1" && pwd)/preload/vsocket-run
[[ -x $vrun ]] || { echo "pair-checksum: $vrun not built" >&2; exit 2; }
command -v socat >/dev/null || { echo "pair-checksum: socat not installed" >&2; exit 2; }
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
# Then socat under the interposer, default policy: listen, hash, keep stats.
# Once the kernel lists its port as listening (vsocket listens on RDMA
# before the kernel does), a marker in the shared directory tells guest b.
# Without it, a client attempt could find no RDMA listener yet, then the TCP
# port open a moment later, and rightly settle for TCP (1 run in about 10).
listen_hex=$(printf '%04X' "$((port + 1))")
cmd_a+=$(printf '; timeout 300 %q --stats -- socat -u TCP-LISTEN:%d,reuseaddr OPEN:/tmp/socat.in,creat,trunc 2>%q & socat_pid=$!; for i in $(seq 600); do grep -q ":%s 00000000:0000 0A" /proc/net/tcp && break; sleep 0.05; done; touch %q; wait $socat_pid; echo "socat received $(stat -c %%s /tmp/socat.in) bytes" >&2; sha256sum </tmp/socat.in | cut -d" " -f1 >%q' \
  "$vrun" "$((port + 1))" "$work/out/a.socat.stats" "$listen_hex" "$work/out/a.listening" "$work/out/a.socat.sha256")
# shellcheck disable=SC2016
# Guest b: send the host's file (the guest sees the host's / read-only).
cmd_b=$(printf 'timeout 300 %q send-file "$VSOCKET_RDMA_PEER_IP" %d %q' \
  "$bench" "$port" "$work/data")
# Then socat, once guest a's marker says it listens (the retries remain for
# a slow share; no negative caching of refused attempts, so the one that
# connects probes RDMA afresh).
cmd_b+=$(printf '; for i in $(seq 600); do [ -e %q ] && break; sleep 0.05; done; ok=0; for i in $(seq 100); do if VSOCKET_RDMA_NEGATIVE_TTL_MS=0 timeout 300 %q --stats -- socat -u OPEN:%q TCP:"$VSOCKET_RDMA_PEER_IP":%d 2>%q; then ok=1; break; fi; sleep 0.2; done; [ $ok = 1 ]' \
  "$work/out/a.listening" "$vrun" "$work/data" "$((port + 1))" "$work/out/b.socat.stats")

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
echo "pair-checksum: channel: SHA-256 matches end to end ($mb MiB)"
got=$(cat "$work/out/a.socat.sha256" 2>/dev/null || true)
if [[ $got != "$want" ]]; then
  echo "pair-checksum: FAIL: socat in guest a received SHA-256 '${got:-nothing}', sent $want" >&2
  exit 1
fi
for side in a b; do
  line=$(grep '^{"pid"' "$work/out/$side.socat.stats" | tail -1 || true)
  echo "pair-checksum: socat guest $side stats: $line"
  if [[ $line != *'"rdma":{"connections":1'* ]]; then
    echo "pair-checksum: FAIL: socat in guest $side did not use RDMA" >&2
    cat "$work/out/$side.socat.stats" >&2 || true
    exit 1
  fi
done
echo "pair-checksum: PASS: SHA-256 matches end to end ($mb MiB), twice; socat chose RDMA between hosts"
