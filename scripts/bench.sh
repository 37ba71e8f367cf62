#!/usr/bin/env bash
# Builds vsocket and runs the main job: vsocket-bench --local over every
# transport available on this machine, printing the table and writing
# bench-results/{results.json,plot.svg}.  Extra arguments go to vsocket-bench.
#
# RDMA: where this machine has an RDMA device, it is one more transport in
# the same run (VSOCKET_TRANSPORT=rdma).  Without a device
# (the development and CI machines) RDMA is measured in a Soft-RoCE QEMU
# guest by benchmarks/rdma/run.sh; VSOCKET_BENCH_RDMA_VM=1 runs that here
# too, after the local run (needs root; ~3-5 min; see docs/BENCHMARKS.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
cmake -S "$top" -B "$top/build-release" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$top/build-release" -j"$(nproc)" --target vsocket-bench vsocket-idle-cpu
out="$top/bench-results"
mkdir -p "$out"
transports=tcp,shm
bench="$top/build-release/benchmarks/vsocket-bench"
address=()
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
  transports="$transports,rdma"
  # Both ends use an address of the first RDMA link's network device
  # (loopback has no RDMA device); shm and tcp are measured there too.
  netdev=$(rdma link show 2>/dev/null | awk '{for (i = 1; i < NF; ++i) if ($i == "netdev") { print $(i + 1); exit }}')
  ip4=$([[ -n $netdev ]] && ip -4 -o addr show dev "$netdev" | awk '{split($4, a, "/"); print a[1]; exit}')
  if [[ -n ${ip4:-} ]]; then address=(--address "$ip4"); fi
else
  echo "bench: no RDMA device here; RDMA is measured in a Soft-RoCE QEMU guest by benchmarks/rdma/run.sh"
  if [[ ${VSOCKET_BENCH_RDMA_VM:-} == 1 ]]; then
    echo "bench: VSOCKET_BENCH_RDMA_VM=1: running it after the local run"
  else
    echo "bench: (set VSOCKET_BENCH_RDMA_VM=1 to run it here too; needs root, a few minutes)"
  fi
fi
"$bench" --local "${address[@]}" --transports "$transports" \
  --json "$out/results.json" --plot "$out/plot.svg" "$@"
"$top/build-release/benchmarks/vsocket-idle-cpu" --idle-ms 2000
echo "wrote $out/results.json and $out/plot.svg"
if [[ ${VSOCKET_BENCH_RDMA_VM:-} == 1 ]] && ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
  "$top/benchmarks/rdma/run.sh" --build "$top/build-release" --out "$out/rdma"
fi
