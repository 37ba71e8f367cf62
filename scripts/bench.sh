#!/usr/bin/env bash
# Builds vsocket and runs the main job: vsocket-bench --local over every
# transport available on this machine, printing the table and writing
# bench-results/{results.json,plot.svg}.  Extra arguments go to vsocket-bench.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
cmake -S "$top" -B "$top/build-release" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$top/build-release" -j"$(nproc)" --target vsocket-bench vsocket-idle-cpu
out="$top/bench-results"
mkdir -p "$out"
transports=tcp,shm
if ls /sys/class/infiniband/* >/dev/null 2>&1; then transports="$transports,rdma"; fi
"$top/build-release/benchmarks/vsocket-bench" --local --transports "$transports" \
  --json "$out/results.json" --plot "$out/plot.svg" "$@"
"$top/build-release/benchmarks/vsocket-idle-cpu" --idle-ms 2000
echo "wrote $out/results.json and $out/plot.svg"
