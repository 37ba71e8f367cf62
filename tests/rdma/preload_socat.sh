#!/bin/bash
# Runs inside the Soft-RoCE guest (tests/rdma/run-suite.sh): an unmodified
# program, socat, moves a file in each direction under the preload library
# with VSOCKET_TRANSPORT=rdma; both ends must report the rdma transport and
# the SHA-256 must match.
#   tests/rdma/preload_socat.sh BUILD_DIR      (VSOCKET_RDMA_TEST_MB, default 32)
set -euo pipefail
build="$1"
run="$build/preload/vsocket-run"
ip="${VSOCKET_RDMA_SELF_IP:?run in the guest}"
mb="${VSOCKET_RDMA_TEST_MB:-32}"
command -v socat >/dev/null || { echo "SKIP: socat not installed"; exit 77; }
tmp="$(mktemp -d)"
head -c $((mb << 20)) /dev/urandom >"$tmp/in"
want="$(sha256sum <"$tmp/in" | cut -d' ' -f1)"

source "$(dirname "${BASH_SOURCE[0]}")/guest-common.sh"  # wait_listening

check_stats() {  # file role
  local line
  line="$(grep '^{"pid"' "$1" | tail -1)"
  echo "  $2 stats: $line"
  if [[ "$line" != *'"rdma":{"connections":1'* ]]; then
    echo "FAIL: $2 did not use rdma"; cat "$1"; return 1
  fi
}

failed=0
# client -> server
port=18515
"$run" --transport rdma --stats -- socat -u TCP-LISTEN:$port,reuseaddr \
  OPEN:"$tmp/out1",creat,trunc 2>"$tmp/s1.err" &
server=$!
wait_listening $port 100
start=$(date +%s.%N)
"$run" --transport rdma --stats -- socat -u OPEN:"$tmp/in" TCP:$ip:$port 2>"$tmp/c1.err"
wait $server
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
got="$(sha256sum <"$tmp/out1" | cut -d' ' -f1)"
echo "  client->server: $mb MiB in $secs s, sha256 ${got:0:16}... (want ${want:0:16}...)"
[[ "$got" == "$want" ]] || { echo "FAIL: client->server corrupted"; failed=1; }
check_stats "$tmp/s1.err" server || failed=1
check_stats "$tmp/c1.err" client || failed=1

# server -> client
port=18516
"$run" --transport rdma --stats -- socat -u OPEN:"$tmp/in" \
  TCP-LISTEN:$port,reuseaddr 2>"$tmp/s2.err" &
server=$!
wait_listening $port 100
start=$(date +%s.%N)
"$run" --transport rdma --stats -- socat -u TCP:$ip:$port \
  OPEN:"$tmp/out2",creat,trunc 2>"$tmp/c2.err"
wait $server
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
got="$(sha256sum <"$tmp/out2" | cut -d' ' -f1)"
echo "  server->client: $mb MiB in $secs s, sha256 ${got:0:16}..."
[[ "$got" == "$want" ]] || { echo "FAIL: server->client corrupted"; failed=1; }
check_stats "$tmp/s2.err" server || failed=1
check_stats "$tmp/c2.err" client || failed=1
rm -rf "$tmp"
if [[ $failed -eq 0 ]]; then echo "PASS preload_socat"; fi
exit $failed
