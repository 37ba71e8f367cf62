#!/usr/bin/env bash
# RDMA benchmark on Soft-RoCE: boots ONE QEMU guest (tests/rdma_vm/
# run-in-guest.sh, 2 vCPUs) and measures, in that same run, the device's
# limit (perftest ib_write_bw / ib_write_lat), rsocket (rstream), kernel TCP
# (rstream -T s) and vsocket's RdmaChannel (benchmarks/rdma_channel_bench),
# then prints a markdown table with absolute figures and the ratios
# (see benchmarks/rdma/guest-bench.sh for what is measured).
#
#   benchmarks/rdma/run.sh [--build DIR] [--out DIR] [--timeout S] [-- CHANNEL-OPTIONS...]
#     --build DIR   build tree (default <repo>/build-release; configured and
#                   the benchmark targets built if needed)
#     --out DIR     results: DIR/results.md, results.env, logs/ (default
#                   <repo>/bench-results/rdma; emptied first)
#     --timeout S   guest deadline (default 900)
#     CHANNEL-OPTIONS  rdma_channel_bench options for both sides, e.g.
#                   -- --spin-ns 2000000 --signal-every 64
#   Environment: RDMA_BENCH_MIB (MiB per stream test, default 64),
#   RDMA_BENCH_PINGS (round trips, default 2000),
#   RDMA_BENCH_SOCKET_TUNED_SPIN_US (the second socket-level run's
#   VSOCKET_SPIN_US, default 2000), VSOCKET_SPIN_US (the first's).
#
# Needs root (run-in-guest.sh installs qemu, rdma-core, perftest with
# apt-get and fetches a Debian kernel once), cmake and a compiler.
# Exit status: 0 every figure measured; 1 some measurement failed (the table
# says n/a there); 2 usage; 124 guest deadline; 125 harness failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build-release
out=$repo/bench-results/rdma
timeout=900
channel_opts=()

while (($#)); do
  case $1 in
  --build) build=${2:?--build needs a directory}; shift 2 ;;
  --out) out=${2:?--out needs a directory}; shift 2 ;;
  --timeout) timeout=${2:?--timeout needs seconds}; shift 2 ;;
  --) shift; channel_opts=("$@"); break ;;
  -h|--help) sed -n '2,25s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "rdma bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target rdma_channel_bench vsocket-bench
build=$(cd "$build" && pwd)
[[ -x $build/benchmarks/rdma_channel_bench ]] ||
  { echo "rdma bench: rdma_channel_bench was not built (rdma-core dev files missing?)" >&2; exit 2; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "${out:?}/logs" "$out/results.md" "$out/results.env"

env_args=(--env "RDMA_BENCH_OUT=$out" --env "RDMA_BENCH_BUILD=$build"
          --env "RDMA_BENCH_CHANNEL_OPTS=${channel_opts[*]}")
for var in RDMA_BENCH_MIB RDMA_BENCH_PINGS RDMA_BENCH_SOCKET_TUNED_SPIN_US VSOCKET_SPIN_US; do
  if [[ -n ${!var:-} ]]; then env_args+=(--env "$var=${!var}"); fi
done

echo "rdma bench: host load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) host cores)"
status=0
"$repo/tests/rdma_vm/run-in-guest.sh" --timeout "$timeout" --writable "$out" "${env_args[@]}" \
  -- bash "$repo/benchmarks/rdma/guest-bench.sh" || status=$?
echo "rdma bench: host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -f $out/results.md ]]; then
  echo "rdma bench: wrote $out/results.md (raw figures: results.env, logs: logs/)"
fi
exit "$status"
