#!/bin/bash
# Runs inside the Soft-RoCE guest (tests/rdma/run-suite.sh): sockets over
# links (VSOCKET_RDMA_LINKS=1, rdma_backend/README.md "Links"), both ends
# under vsocket-run --transport rdma --stats, tests/preload/progs/many_clients:
#   1. a "victim" client process opens 100 connections to the server and
#      holds them (its data checked first);
#   2. a "survivor" client process opens 1,000 connections to the same
#      server (1,100 concurrent on the server), while they are all open the
#      guest's RC QPs are counted (`rdma res show qp`): one link per client
#      process, VSOCKET_RDMA_QPS_PER_LINK QPs each, on both ends: at most
#      4 x that for the three processes, not one per connection;
#   3. the victim is SIGKILLed; the survivor then sends a distinct 64-byte
#      message on each of its 1,000 connections and checks every echo
#      (its output equals the kernel TCP run's), the server counts exactly
#      the victim's 100 connections reset and serves all 1,100;
#   4. statistics: every connection of every process on RDMA, no fallback
#      reason, "links" reported.
# 64 KiB rings (VSOCKET_RDMA_RING_SIZE) keep 1,100 connections under the
# registration limit.
#   tests/rdma/preload_links.sh BUILD_DIR
set -euo pipefail
build="$1"
run="$build/preload/vsocket-run"
prog="$build/tests/preload/progs/many_clients"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
[[ -x $prog ]] || { echo "FAIL: $prog not built"; exit 1; }
tmp="$(mktemp -d)"
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# 64 KiB rings: 1,100 connections x (ring + mirror) = 137 MiB, under the
# default 256 MiB registration limit on both ends (with 1 MiB rings the
# limit, not the link, would send most of them to TCP: preload_many.sh).
export VSOCKET_RDMA_PROBE_MS=3000 PTEST_IP="$ip" VSOCKET_RDMA_LINKS=1 \
  VSOCKET_RDMA_RING_SIZE=64K
qps=${VSOCKET_RDMA_QPS_PER_LINK:-1}
ulimit -n 8192
source "$(dirname "${BASH_SOURCE[0]}")/guest-common.sh"  # wait_listening

victims=100 survivors=1000 port=18700
rc_qps() { rdma res show qp 2>/dev/null | grep -c 'type RC' || true; }

# Kernel TCP first: the survivor's expected output.
"$prog" server $port $survivors >"$tmp/kernel.server" 2>&1 &
pids+=($!)
wait_listening $port 300
"$prog" client $port $survivors >"$tmp/kernel.client" 2>&1
wait "${pids[-1]}"

port=$((port + 1))
start=$SECONDS
"$run" --transport rdma --stats -- "$prog" server $port $((victims + survivors)) \
  >"$tmp/server" 2>&1 &
server=$!
pids+=($server)
wait_listening $port 300
"$run" --transport rdma --stats -- "$prog" client $port $victims 64 600000 \
  >"$tmp/victim" 2>&1 &
victim=$!
pids+=($victim)
for _ in $(seq 600); do grep -q '^checked' "$tmp/victim" && break; sleep 0.1; done
grep -q "^checked" "$tmp/victim" || { echo "FAIL: the victim did not check its data"; tail -n 20 "$tmp/victim" "$tmp/server"; exit 1; }
# The survivor opens its connections, pauses 5 s (counted, victim killed
# meanwhile), then sends on every one of them.
MANY_CLIENTS_PAUSE_MS=5000 "$run" --transport rdma --stats -- "$prog" client $port $survivors \
  >"$tmp/survivor" 2>&1 &
survivor=$!
pids+=($survivor)
for _ in $(seq 1200); do grep -q '^opened' "$tmp/survivor" && break; sleep 0.1; done
grep -q '^opened' "$tmp/survivor" || { echo "FAIL: the survivor did not open its connections"; cat "$tmp/survivor"; exit 1; }
max_qps=$(rc_qps)
kill -9 $victim
wait $victim 2>/dev/null || true
status=0
wait $survivor || status=$?
wait $server || status=$?
secs=$((SECONDS - start))
failed=0
if ((status != 0)); then
  echo "FAIL: a program failed (status $status)"; failed=1
fi
echo "  RC QPs in the guest with $((victims + survivors)) connections open: $max_qps (limit $((4 * qps)))"
if ((max_qps < 1 || max_qps > 4 * qps)); then
  echo "FAIL: RC QPs $max_qps, want 1..$((4 * qps))"; failed=1
fi
grep -E '^(checked|PASS)' "$tmp/kernel.client" >"$tmp/want"
grep -E '^(checked|PASS)' "$tmp/survivor" >"$tmp/got" || true
if ! diff -q "$tmp/want" "$tmp/got" >/dev/null; then
  echo "FAIL: the survivor's output differs from kernel TCP's"; failed=1
fi
if ! grep -qx "reset $victims" "$tmp/server" || ! grep -qx "served $((victims + survivors))" "$tmp/server"; then
  echo "FAIL: the server should count $victims resets and serve $((victims + survivors))"; failed=1
fi
/usr/bin/python3 - "$tmp/server" $((victims + survivors)) "$tmp/survivor" $survivors <<'PY' || failed=1
import json, sys
bad = False
for path, n in ((sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4]))):
    lines = [l for l in open(path) if l.startswith('{"pid"')]
    if not lines:
        print(f"FAIL {path}: no statistics line"); bad = True; continue
    s = json.loads(lines[-1])
    t = s.get("transports", {})
    rdma = t.get("rdma", {}).get("connections", 0)
    reasons = s.get("fallback_reasons", {})
    links = s.get("rdma_registered", {}).get("links")
    print(f"  {path.rsplit('/', 1)[-1]}: rdma {rdma} of {n}, reasons {reasons}, links at exit {links}")
    if rdma != n or reasons or links is None:
        print(f"FAIL: want all {n} on rdma, no reason, a links count"); bad = True
sys.exit(1 if bad else 0)
PY
if ((failed)); then
  for f in server victim survivor; do sed "s/^/  $f: /" "$tmp/$f" | tail -20; done
  exit 1
fi
echo "  $((victims + survivors)) connections over links in ${secs}s"
echo "PASS preload_links"
