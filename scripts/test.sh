#!/usr/bin/env bash
# Builds vsocket twice (optimised, and with AddressSanitizer + UBSan) and runs
# the whole test suite in each build (after the optimised one also
# scripts/test-install.sh: install, examples/, man pages, the package), a
# short libFuzzer run of every target, then the RDMA suite of the optimised
# build on real Soft-RoCE RDMA in QEMU guests (tests/rdma/run-suite.sh: every
# RDMA test in one guest boot, plus a two-guest SHA-256 transfer).  Exit
# status 0 only if everything passes.  What CI runs (.ci/run).
#
#   scripts/test.sh            needs root: installs its own packages
#   scripts/test.sh --quick    the edit-test loop: the optimised build and
#                              its host suite only (no install check, no
#                              sanitizers, no fuzzing, no guest), printed
#                              loudly as partial.  Before a commit that
#                              lands, run the full command.
#
# Each build's suite runs in two passes: every test not labelled `serial`
# with ctest -j$(nproc), then the `serial` ones (timing, kill loops, ten
# thousand connections, memory and throughput figures, real servers under
# load) with -j1, so that they have the machine to themselves.
#
# Environment (developers; CI sets none of them):
#   VSOCKET_SKIP_RDMA_VM=1     no RDMA guest stage (printed loudly)
#   VSOCKET_FUZZ_SECONDS=N     each libFuzzer target runs N s (default 15;
#                              0: no fuzz stage).  The corpus replay tests
#                              (ctest -L fuzz) run in both builds regardless;
#                              the long runs are scripts/fuzz.sh's.
#   VSOCKET_CTEST_JOBS=N       the parallel pass's -j (default: nproc)
#   VSOCKET_CTEST_REPEAT=N     every test runs until it fails, at most N
#                              times (ctest --repeat until-fail:N): the
#                              flake hunt of docs/ROBUSTNESS.md
#   VSOCKET_CTEST_ARGS="..."   more ctest arguments for both passes
#                              (e.g. -R KillLoop)
#   VSOCKET_CCACHE_DIR=DIR     compile through ccache with its cache in DIR
#                              (scripts/test-in-fresh-root.sh sets it, so
#                              CI's roots share one; scripts/ccache-args.sh)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
quick=0
case ${1:-} in
  --quick) quick=1 ;;
  "") ;;
  -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
t_start=$SECONDS
stage_times=()
stage_done() {  # name, start second
  stage_times+=("$(printf '%-40s %5d s' "$1" $((SECONDS - $2)))")
}

t=$SECONDS
deps=(--apps)
[[ -n ${VSOCKET_CCACHE_DIR:-} ]] && deps+=(--ccache)
"$top/scripts/install-deps.sh" "${deps[@]}"
source "$top/scripts/ccache-args.sh"
if ((!quick)) && [[ ${VSOCKET_SKIP_RDMA_VM:-} != 1 ]]; then
  # qemu, busybox, rdma-core tools, perftest and the guest kernel (cached in
  # /var/cache/vsocket-rdma-vm): fail now rather than after the builds.
  "$top/tests/rdma_vm/run-in-guest.sh" --prepare
fi
stage_done "packages" "$t"

jobs=$(nproc)
ctest_jobs=${VSOCKET_CTEST_JOBS:-$jobs}
ctest_extra=(--output-on-failure --timeout 300)
if [[ -n ${VSOCKET_CTEST_REPEAT:-} ]]; then
  ctest_extra+=(--repeat "until-fail:$VSOCKET_CTEST_REPEAT")
fi
# shellcheck disable=SC2206  # word splitting is the point
[[ -n ${VSOCKET_CTEST_ARGS:-} ]] && ctest_extra+=($VSOCKET_CTEST_ARGS)

# Line tables only (-g1): backtraces (ASan's, gdb's) still name files and
# lines, and the trees build in about a fifth less time than with -g.  A
# tree of your own for gdb's locals: cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug.
lines_only="-O2 -g1 -DNDEBUG"
build_tree() {  # name, extra cmake args...
  local dir="$top/build-$1"; shift
  cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$lines_only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$lines_only" "${ccache_args[@]}" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}
# Both passes run even when the first fails, so one run shows every failure.
run_ctest() {  # build dir
  local status=0
  echo "-- ctest -j$ctest_jobs: every test not labelled serial"
  (cd "$1" && ctest "${ctest_extra[@]}" -j"$ctest_jobs" -LE serial) || status=1
  echo "-- ctest -j1: the tests labelled serial"
  (cd "$1" && ctest "${ctest_extra[@]}" -j1 -L serial) || status=1
  return $status
}

echo "== optimised build =="
t=$SECONDS; build_tree release; stage_done "optimised build" "$t"
t=$SECONDS; run_ctest "$top/build-release"; stage_done "optimised suite" "$t"
if ((quick)); then
  printf '%s\n' "${stage_times[@]}"
  echo "!! QUICK CHECK ONLY ($((SECONDS - t_start)) s): no install check, no sanitizer"
  echo "!! build, no fuzzing, no RDMA guest.  Run scripts/test.sh before it lands."
  exit 0
fi

echo "== install, examples/ against it, man pages, Debian package (optimised build) =="
t=$SECONDS; "$top/scripts/test-install.sh" "$top/build-release"; stage_done "install check" "$t"

echo "== AddressSanitizer + UBSan build =="
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
t=$SECONDS
build_tree sanitize -DVSOCKET_SANITIZE=ON -DVSOCKET_BUILD_BENCHMARKS=OFF
stage_done "sanitizer build" "$t"
t=$SECONDS; run_ctest "$top/build-sanitize"; stage_done "sanitizer suite" "$t"
unset ASAN_OPTIONS UBSAN_OPTIONS

fuzz_seconds=${VSOCKET_FUZZ_SECONDS:-15}
if [[ $fuzz_seconds != 0 ]]; then
  echo "== libFuzzer targets, ${fuzz_seconds} s each (clang, build-fuzz) =="
  t=$SECONDS; "$top/scripts/fuzz.sh" -t "$fuzz_seconds" -j "$jobs"; stage_done "fuzzing" "$t"
else
  echo "!! SKIPPED: VSOCKET_FUZZ_SECONDS=0, the fuzz targets did not run."
fi

echo "== RDMA suite in the Soft-RoCE guest (optimised build) =="
if [[ ${VSOCKET_SKIP_RDMA_VM:-} == 1 ]]; then
  echo "!! SKIPPED: VSOCKET_SKIP_RDMA_VM=1 is set, so the RDMA tests did NOT run."
  echo "!! Run tests/rdma/run-suite.sh $top/build-release (as root) before merging."
else
  t=$SECONDS; "$top/tests/rdma/run-suite.sh" "$top/build-release"; stage_done "RDMA guest stage" "$t"
fi
echo "== stage times =="
printf '%s\n' "${stage_times[@]}"
if ((${#ccache_args[@]})); then ccache --show-stats | grep -iE 'hits|misses|cache size' || true; fi
echo "all stages passed in $((SECONDS - t_start)) s"
