#!/usr/bin/env bash
# Builds vsocket twice (optimised, and with AddressSanitizer + UBSan) and runs
# the whole test suite in each build (after the optimised one also
# scripts/test-install.sh: install, examples/, man pages, the package), then
# the RDMA suite of the optimised build on real Soft-RoCE RDMA in QEMU guests
# (tests/rdma/run-suite.sh: every tests/rdma/rdma_*_test in one guest, plus a
# two-guest SHA-256 transfer; about a minute).  Exit status 0 only if
# everything passes.
#
#   scripts/test.sh                        needs root: installs its own packages
#   VSOCKET_SKIP_RDMA_VM=1 scripts/test.sh developers only: no RDMA guest stage
#                                          (printed loudly; CI must not set it)
#   VSOCKET_FUZZ_SECONDS=N scripts/test.sh every libFuzzer target runs N s
#                                          (scripts/fuzz.sh, clang; default 60;
#                                          0: developers only, no fuzz stage).
#                                          The replay tests (ctest -L fuzz)
#                                          run in both builds regardless.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh" --apps
if [[ ${VSOCKET_SKIP_RDMA_VM:-} != 1 ]]; then
  # qemu, busybox, rdma-core tools, perftest and the guest kernel (cached in
  # /var/cache/vsocket-rdma-vm): fail now rather than after the builds.
  "$top/tests/rdma_vm/run-in-guest.sh" --prepare
fi
jobs=$(nproc)
run_suite() {  # name, extra cmake args...
  local dir="$top/build-$1"; shift
  cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 300 -j1)
}
echo "== optimised build =="
run_suite release
echo "== install, examples/ against it, man pages, Debian package (optimised build) =="
"$top/scripts/test-install.sh" "$top/build-release"
echo "== AddressSanitizer + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite sanitize -DVSOCKET_SANITIZE=ON -DVSOCKET_BUILD_BENCHMARKS=OFF
fuzz_seconds=${VSOCKET_FUZZ_SECONDS:-60}
if [[ $fuzz_seconds != 0 ]]; then
  echo "== libFuzzer targets, ${fuzz_seconds} s each (clang, build-fuzz) =="
  "$top/scripts/fuzz.sh" -t "$fuzz_seconds"
else
  echo "!! SKIPPED: VSOCKET_FUZZ_SECONDS=0, the fuzz targets did not run."
fi
echo "== RDMA suite in the Soft-RoCE guest (optimised build) =="
if [[ ${VSOCKET_SKIP_RDMA_VM:-} == 1 ]]; then
  echo "!! SKIPPED: VSOCKET_SKIP_RDMA_VM=1 is set, so the RDMA tests did NOT run."
  echo "!! Run tests/rdma/run-suite.sh $top/build-release (as root) before merging."
else
  rdma_start=$SECONDS
  "$top/tests/rdma/run-suite.sh" "$top/build-release"
  echo "RDMA stage took $((SECONDS - rdma_start)) s"
fi
