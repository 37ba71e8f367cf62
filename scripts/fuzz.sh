#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, -DVSOCKET_FUZZ=ON, clang with
# ASan + UBSan, in build-fuzz/) and runs each for N seconds on a copy of its
# committed corpus, nice'd, one at a time (or -j N at a time).  Exit status
# 0 only if no target found a crash, a leak, a hang or a failed check.
#
#   scripts/fuzz.sh                 every target, 60 s each
#   scripts/fuzz.sh -t 300 ring     one target, 5 minutes
#   scripts/fuzz.sh -t 15 -j 2      every target 15 s, two at a time (what
#                                   scripts/test.sh, and so CI, runs)
#   scripts/fuzz.sh -l              list the targets
#
# CI's short runs find shallow faults and keep the targets building; the
# long runs (10 minutes and more, by hand) are recorded with their dates in
# docs/ROBUSTNESS.md, "Fuzzing".
#
# Longer runs by hand: after one run of this script,
#   cd build-fuzz/tests/fuzz
#   mkdir -p work/ring && ./ring_fuzz -max_total_time=3600 -timeout=5 \
#       -rss_limit_mb=2048 work/ring ../../../tests/fuzz/corpus/ring
# (the first directory collects new inputs, the others are read).  A crash
# leaves crash-<sha1> in the current directory; replay it with
#   ./ring_fuzz crash-<sha1>
# and, once fixed, add it to tests/fuzz/corpus/ring/ so that the replay test
# (ctest -R fuzz.) keeps it fixed in every build.  To grow the committed
# corpus, minimise first: ./ring_fuzz -merge=1 <new dir> work/ring.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
parallel=1
targets=()
while (($#)); do
  case "$1" in
    -t) seconds=$2; shift 2 ;;
    -j) parallel=$2; shift 2 ;;
    -l) ls "$top/tests/fuzz" | sed -n 's/_fuzz\.cc$//p'; exit 0 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(ls "$top/tests/fuzz" | sed -n 's/_fuzz\.cc$//p')
fi
deps=(--fuzz)  # clang and its runtimes
[[ -n ${VSOCKET_CCACHE_DIR:-} ]] && deps+=(--ccache)
"$top/scripts/install-deps.sh" "${deps[@]}"  # idempotent
source "$top/scripts/ccache-args.sh"
build="$top/build-fuzz"
# -O1 and line tables only (-g1), as OSS-Fuzz builds its sanitizer
# fuzzers: a crash's stack still names files and lines, and the
# instrumented tree compiles in about half the time of -O2 -g.
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DVSOCKET_FUZZ=ON \
  -DVSOCKET_BUILD_BENCHMARKS=OFF "${ccache_args[@]}" >/dev/null
# The build may use every core (VSOCKET_FUZZ_JOBS, default all); the runs
# are nice'd, -j at a time.
nice -n 10 cmake --build "$build" -j"${VSOCKET_FUZZ_JOBS:-$(nproc)}" \
  --target "${targets[@]/%/_fuzz}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_target() {  # name: one target's run; its report on stdout
  local t=$1 work="$build/tests/fuzz/work/$1" log="$build/tests/fuzz/$1.log"
  mkdir -p "$work"
  # Inputs found go to $work; the committed corpus is only read.
  if (cd "$build/tests/fuzz" && nice -n 10 "./${t}_fuzz" -max_total_time="$seconds" \
        -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
        "$work" "$top/tests/fuzz/corpus/$t" >"$log" 2>&1); then
    echo "== $t: ${seconds} s (log: $log)"
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^#[0-9]+.*DONE' "$log" || true
  else
    echo "== $t: ${seconds} s (log: $log)"
    echo "!! $t failed: see $log"; grep -E 'ERROR|FUZZ_CHECK|SUMMARY|Test unit written' "$log" | head -5
    return 1
  fi
}
status=0
pids=() names=()
for t in "${targets[@]}"; do
  run_target "$t" >"$build/tests/fuzz/$t.report" &
  pids+=($!) names+=("$t")
  if ((${#pids[@]} >= parallel)); then
    wait "${pids[0]}" || status=1
    cat "$build/tests/fuzz/${names[0]}.report"
    pids=("${pids[@]:1}") names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$build/tests/fuzz/${names[$i]}.report"
done
exit $status
