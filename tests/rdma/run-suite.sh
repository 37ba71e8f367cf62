#!/usr/bin/env bash
# The RDMA test suite on real (Soft-RoCE) RDMA, as scripts/test.sh runs it:
#
#   1. one QEMU guest (tests/rdma_vm/run-in-guest.sh) runs every RDMA test
#      executable found under BUILD_DIR/tests/rdma (glob rdma_*_test: new
#      test binaries are picked up without editing this script), one after
#      the other, then every test script tests/rdma/preload_*.sh (real
#      programs under the interposer, given BUILD_DIR); every one must exit
#      0.  Exit 77 ("skipped: no RDMA device") counts as a failure here: the
#      guest has a device.
#   2. two guests (run-in-guest.sh --pair, one vCPU each, emulated link):
#      tests/rdma/pair-checksum.sh sends VSOCKET_RDMA_PAIR_MB (default 32)
#      MiB of random data from guest b to guest a with
#      BUILD_DIR/benchmarks/rdma_channel_bench and compares SHA-256 sums.
#      Skipped (and said so) when the bench binary was not built
#      (-DVSOCKET_BUILD_BENCHMARKS=OFF).  Then tests/rdma/ddp_pair.sh: a
#      DistributedDataParallel job with one rank per guest, run on kernel
#      TCP, under vsocket-run on RDMA, and with RDMA refused; the three
#      runs' final parameters must be identical; then the same job with
#      three ranks in three guests (VSOCKET_DDP_GUESTS=3: gloo's ring
#      all-reduce), on TCP and on RDMA.  Then tests/rdma/
#      mpi_pair.sh: an Open MPI all-reduce (btl tcp) with one rank per
#      guest, launched without ssh, on kernel TCP and under vsocket-run
#      (ranks on RDMA); sums exact and identical.  VSOCKET_RDMA_SKIP_PAIR=1
#      skips all four.
#
#   tests/rdma/run-suite.sh BUILD_DIR
#
# Needs: root (run-in-guest.sh installs qemu, rdma-core, perftest ... with
# apt-get and fetches a Debian kernel once; see tests/rdma_vm/README.md),
# BUILD_DIR configured with rdma-core present (VSOCKET_HAVE_RDMA) and built.
# Environment: VSOCKET_RDMA_LINKS, VSOCKET_RDMA_QPS_PER_LINK (passed to every
# test), VSOCKET_RDMA_TEST_MB, VSOCKET_RDMA_TEST_ONLY (passed to
# rdma_channel_test), VSOCKET_RDMA_SUITE_TIMEOUT (single guest deadline,
# default 900 s), VSOCKET_RDMA_SKIP_PAIR=1, VSOCKET_RDMA_PAIR_MB.
#
# Exit status: 0 all passed; 1 a test failed (or no test binary was found);
# 2 usage; 124 a guest hit its deadline; 125 the harness failed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
harness=$repo/tests/rdma_vm/run-in-guest.sh

# ---- in the guest: run the listed binaries, report each, fail if any fails ----
if [[ ${1:-} == --in-guest ]]; then
  shift
  [[ ${VSOCKET_RDMA_GUEST:-} == 1 ]] || { echo "run-suite: --in-guest outside the guest" >&2; exit 2; }
  failed=() summary=()
  for bin in "$@"; do
    name=$(basename "$bin")
    echo "=== $name ==="
    t0=$(date +%s.%N)
    status=0
    # Each binary bounds its own scenarios; this is the backstop.
    if [[ $bin == *.sh ]]; then
      timeout --kill-after=10 600 bash "$bin" "$VSOCKET_RDMA_BUILD" || status=$?
    else
      timeout --kill-after=10 600 "$bin" || status=$?
    fi
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if ((status == 0)); then
      summary+=("PASS $name (${secs}s)")
    else
      if ((status == 77)); then
        summary+=("FAIL $name: exit 77 = skipped, but this guest has an RDMA device (${secs}s)")
      else
        summary+=("FAIL $name: exit status $status (${secs}s)")
      fi
      failed+=("$name")
    fi
  done
  echo "=== RDMA suite summary (guest: $(nproc) vCPU, kernel $(uname -r)) ==="
  printf '%s\n' "${summary[@]}"
  ((${#failed[@]} == 0)) || { echo "FAILED: ${failed[*]}"; exit 1; }
  exit 0
fi

# ---- on the host ----
if (($# != 1)) || [[ $1 == -* ]]; then
  sed -n '2,27s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
build=$(cd "$1" && pwd)

shopt -s nullglob
tests=()
for bin in "$build"/tests/rdma/rdma_*_test; do
  [[ -f $bin && -x $bin ]] && tests+=("$bin")
done
scripts=("$repo"/tests/rdma/preload_*.sh)
shopt -u nullglob
if ((${#tests[@]} == 0)); then
  echo "run-suite: no RDMA test executables (rdma_*_test) in $build/tests/rdma." >&2
  echo "run-suite: was rdma-core found at configure time (libibverbs-dev, librdmacm-dev)? Was it built?" >&2
  exit 1
fi

tests+=("${scripts[@]}")
env_args=(--env "VSOCKET_RDMA_BUILD=$build")
for var in VSOCKET_RDMA_TEST_MB VSOCKET_RDMA_TEST_ONLY VSOCKET_RDMA_LINKS VSOCKET_RDMA_QPS_PER_LINK; do
  if [[ -n ${!var:-} ]]; then env_args+=(--env "$var=${!var}"); fi
done

start=$SECONDS
echo "run-suite: ${#tests[@]} RDMA test(s) in one guest: ${tests[*]##*/}"
status=0
"$harness" --timeout "${VSOCKET_RDMA_SUITE_TIMEOUT:-900}" "${env_args[@]}" \
  -- bash "$repo/tests/rdma/run-suite.sh" --in-guest "${tests[@]}" || status=$?
echo "run-suite: single-guest stage: status $status, $((SECONDS - start)) s"
if ((status != 0)); then
  case $status in
  124) echo "run-suite: FAIL: the guest hit its deadline" >&2 ;;
  125) echo "run-suite: FAIL: the guest harness failed (see rdma_vm: messages above)" >&2 ;;
  *) echo "run-suite: FAIL: RDMA tests failed" >&2 ;;
  esac
  exit "$status"
fi

# A two-guest test script, given BUILD_DIR; its status is the stage's.
run_pair_test() {  # NAME SCRIPT
  local name=$1 script=$2 t0=$SECONDS log status=0
  log=$(mktemp)
  "$script" "$build" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  if ((status == 124)) && grep -q "NETDEV WATCHDOG" "$log"; then
    # The emulated NIC of a TCG guest stopped transmitting (the guest
    # kernel's TX watchdog says so): an emulator stall, not a vsocket hang,
    # which would leave no such line.  Once more, loudly.
    echo "run-suite: !! two-guest $name: the guest's virtio NIC stalled (NETDEV WATCHDOG); running it once more"
    status=0
    "$script" "$build" || status=$?
  fi
  rm -f "$log"
  echo "run-suite: two-guest $name: status $status, $((SECONDS - t0)) s"
  return "$status"
}

bench=$build/benchmarks/rdma_channel_bench
if [[ ${VSOCKET_RDMA_SKIP_PAIR:-} == 1 ]]; then
  echo "run-suite: two-guest stage SKIPPED (VSOCKET_RDMA_SKIP_PAIR=1)"
else
  if [[ ! -x $bench ]]; then
    echo "run-suite: two-guest checksum test SKIPPED: $bench not built (benchmarks off?)"
  else
    run_pair_test checksum "$repo/tests/rdma/pair-checksum.sh" || exit $?
  fi
  run_pair_test "DDP training" "$repo/tests/rdma/ddp_pair.sh" || exit $?
  VSOCKET_DDP_GUESTS=3 run_pair_test "DDP ring, three guests" "$repo/tests/rdma/ddp_pair.sh" || exit $?
  run_pair_test "MPI all-reduce" "$repo/tests/rdma/mpi_pair.sh" || exit $?
fi
echo "run-suite: PASS ($((SECONDS - start)) s)"
