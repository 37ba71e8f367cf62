#!/usr/bin/env bash
# Builds vsocket twice (optimised, and with AddressSanitizer + UBSan) and runs
# the whole test suite in each build.  Exit status 0 only if both pass.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh" --apps
jobs=$(nproc)
run_suite() {  # name, extra cmake args...
  local dir="$top/build-$1"; shift
  cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 300 -j1)
}
echo "== optimised build =="
run_suite release
echo "== AddressSanitizer + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite sanitize -DVSOCKET_SANITIZE=ON -DVSOCKET_BUILD_BENCHMARKS=OFF
