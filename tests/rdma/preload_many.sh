#!/bin/bash
# Runs inside the Soft-RoCE guest (tests/rdma/run-suite.sh): one client
# process holds N concurrent connections to one server process
# (tests/preload/progs/many_clients: the server echoes, the client checks
# BYTES each way on every connection), both under vsocket-run --transport
# rdma.  The registered-memory limits decide how many of them get RDMA; the
# rest must use TCP, the end whose limit it was saying rdma_memory_limit and
# the other peer_rdma_memory_limit (the decline in the RDMA CM exchange,
# rdma_backend/wire_format.h), never peer_not_vsocket.  From the two
# processes' statistics lines:
#   rdma connections = min over both ends of
#                      (limit_bytes / max_per_connection_bytes,
#                       VSOCKET_RDMA_POOL_MB MiB / ring bytes)
#   (a connection registers its receive ring and the mirror of the peer's,
#   one ring size each; the pool holds VSOCKET_RDMA_POOL_MB of rings)
#   tcp connections  = N - rdma, all with the reasons above
# and the programs' output must equal that of the same run on kernel TCP.
#   case               N    limits
#   pool               100  defaults (32 MiB pool: 32 rings of 1 MiB): the
#                           client's pool is full first
#   registered         100  client VSOCKET_RDMA_MAX_REGISTERED_MB=24 (12 x 2 MiB)
#   server_registered  100  server VSOCKET_RDMA_MAX_REGISTERED_MB=24: the
#                           server rejects with its decline
#   pool_300           300  defaults
#   tests/rdma/preload_many.sh BUILD_DIR   (VSOCKET_RDMA_MANY_ONLY="pool ...": those cases)
set -euo pipefail
build="$1"
run="$build/preload/vsocket-run"
prog="$build/tests/preload/progs/many_clients"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
[[ -x $prog ]] || { echo "FAIL: $prog not built"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# A connection gets 3 s for its probe (a busy TCG guest, as preload_progs.sh).
# The limits above are those of one QP per connection (the bounce pool):
# connections over links do not use the pool (preload_links.sh).
export VSOCKET_RDMA_PROBE_MS=3000 PTEST_IP="$ip" VSOCKET_RDMA_LINKS=0
bytes=131072  # per connection, each way (two 64 KiB rounds)
pool_mb=32
ulimit -n 4096

source "$(dirname "${BASH_SOURCE[0]}")/guest-common.sh"  # wait_listening

# Runs the pair once.  Args: OUT_PREFIX PORT N PRELOAD(0|1) SERVER_ENV
# CLIENT_ENV (each NAME=VALUE or "").
run_pair() {
  local out=$1 port=$2 n=$3 preload=$4 server_env=$5 client_env=$6 server status=0
  local -a vsocket=()
  ((preload)) && vsocket=("$run" --transport rdma --stats --)
  env VSOCKET_RDMA_POOL_MB=$pool_mb ${server_env:+"$server_env"} "${vsocket[@]}" \
    "$prog" server "$port" "$n" >"$out.server" 2>&1 &
  server=$!
  wait_listening "$port" 300 || { kill "$server"; return 1; }
  env VSOCKET_RDMA_POOL_MB=$pool_mb ${client_env:+"$client_env"} "${vsocket[@]}" \
    "$prog" client "$port" "$n" "$bytes" >"$out.client" 2>&1 || status=$?
  wait "$server" || status=$?
  return $status
}

# Checks both statistics lines.  Args: SERVER_FILE CLIENT_FILE N
# SERVER_REASON CLIENT_REASON
check_stats() {
  /usr/bin/python3 - "$@" "$pool_mb" <<'PY'
import json, sys
files = {"server": sys.argv[1], "client": sys.argv[2]}
n, pool_mb = int(sys.argv[3]), int(sys.argv[6])
want_reason = {"server": sys.argv[4], "client": sys.argv[5]}
stats, allowed = {}, n
for role, path in files.items():
    lines = [l for l in open(path) if l.startswith('{"pid"')]
    if not lines:
        sys.exit(f"FAIL {role}: no statistics line")
    s = stats[role] = json.loads(lines[-1])
    reg = s.get("rdma_registered", {})
    per = reg.get("max_per_connection_bytes", 0)
    if per == 0:
        sys.exit(f"FAIL {role}: no RDMA connection at all: {lines[-1]}")
    allowed = min(allowed, reg["limit_bytes"] // per, (pool_mb << 20) // (per // 2))
failed = False
for role, s in stats.items():
    t = s.get("transports", {})
    rdma = t.get("rdma", {}).get("connections", 0)
    tcp = t.get("tcp", {}).get("connections", 0)
    reasons = s.get("fallback_reasons", {})
    want = {want_reason[role]: n - allowed} if n > allowed else {}
    print(f"  {role}: rdma {rdma} (the limits allow {allowed}), tcp {tcp}, "
          f"reasons {reasons}, peak registered "
          f"{s['rdma_registered']['peak_bytes'] >> 20} MiB")
    if rdma != allowed or tcp != n - allowed or reasons != want:
        print(f"FAIL {role}: want rdma {allowed}, tcp {n - allowed}, reasons {want}")
        failed = True
sys.exit(1 if failed else 0)
PY
}

failed=0
port=18600
# NAME:N:SERVER_ENV:CLIENT_ENV:SERVER_REASON:CLIENT_REASON
for entry in \
    pool:100:::peer_rdma_memory_limit:rdma_memory_limit \
    registered:100::VSOCKET_RDMA_MAX_REGISTERED_MB=24:peer_rdma_memory_limit:rdma_memory_limit \
    server_registered:100:VSOCKET_RDMA_MAX_REGISTERED_MB=24::rdma_memory_limit:peer_rdma_memory_limit \
    pool_300:300:::peer_rdma_memory_limit:rdma_memory_limit; do
  IFS=: read -r name n server_env client_env server_reason client_reason <<<"$entry"
  if [[ -n ${VSOCKET_RDMA_MANY_ONLY:-} && " $VSOCKET_RDMA_MANY_ONLY " != *" $name "* ]]; then
    continue
  fi
  port=$((port + 1))
  start=$SECONDS
  if ! run_pair "$tmp/rdma" $port "$n" 1 "$server_env" "$client_env"; then
    echo "FAIL $name: the programs failed under vsocket"
    sed 's/^/  server: /' "$tmp/rdma.server"; sed 's/^/  client: /' "$tmp/rdma.client"
    failed=1; continue
  fi
  secs=$((SECONDS - start))
  port=$((port + 1))
  if ! run_pair "$tmp/kernel" $port "$n" 0 "" ""; then
    echo "FAIL $name: the programs failed on kernel TCP"; failed=1; continue
  fi
  echo "  $name: $n connections, $bytes bytes each way on each, ${secs}s under vsocket"
  ok=1
  check_stats "$tmp/rdma.server" "$tmp/rdma.client" "$n" "$server_reason" \
    "$client_reason" || ok=0
  for role in server client; do
    # The same lines as kernel TCP's (served N / checked ... / PASS); the
    # descriptor and shared-memory figures differ by design.
    # (Files, not <(...): the guest has no /dev/fd.)
    grep -E '^(served|checked|PASS)' "$tmp/kernel.$role" >"$tmp/want" || true
    grep -E '^(served|checked|PASS)' "$tmp/rdma.$role" >"$tmp/got" || true
    if [[ ! -s $tmp/want ]] || ! diff -q "$tmp/want" "$tmp/got" >/dev/null; then
      echo "FAIL $name: $role output differs from kernel TCP's"
      sed 's/^/  kernel: /' "$tmp/kernel.$role"; sed 's/^/  rdma:   /' "$tmp/rdma.$role"
      ok=0
    fi
  done
  if ((ok)); then echo "PASS $name"; else failed=1; fi
done
((failed == 0)) || exit 1
echo "PASS preload_many"
