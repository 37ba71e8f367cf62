#!/bin/bash
# Runs every RDMA test (binaries of BUILD_DIR/tests/rdma, and scripts of this
# directory such as preload_socat.sh) in ONE Soft-RoCE guest boot
# (tests/rdma_vm/run-in-guest.sh) and fails if any fails.
#
#   tests/rdma/run-suite.sh [BUILD_DIR]           default BUILD_DIR: <repo>/build
#   VSOCKET_RDMA_TEST_MB=16 tests/rdma/run-suite.sh build    smaller transfers
#   VSOCKET_RDMA_SUITE="rdma_transport_test" ...             some binaries only
#
# The binaries must already be built (cmake --build BUILD_DIR).  Exit status:
# 0 all passed, 1 a test failed, 124 the guest hit the deadline
# (VSOCKET_RDMA_SUITE_TIMEOUT, default 900 s), 125 the harness failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
suite="${VSOCKET_RDMA_SUITE:-rdma_transport_test preload_socat.sh rdma_channel_test}"
bins=()
for name in $suite; do
  if [[ "$name" == *.sh ]]; then
    # A script of this directory, run with the build directory.
    bins+=("$repo/tests/rdma/$name $build")
    continue
  fi
  bin="$build/tests/rdma/$name"
  if [[ ! -x "$bin" ]]; then
    echo "run-suite.sh: $bin not built (cmake --build $build)" >&2
    exit 2
  fi
  bins+=("$bin")
done
env_args=()
for var in VSOCKET_RDMA_TEST_MB VSOCKET_RDMA_TEST_ONLY VSOCKET_LOG; do
  if [[ -n "${!var:-}" ]]; then env_args+=(--env "$var=${!var}"); fi
done
# One guest: a small driver runs each binary, reports each, and exits
# non-zero if any failed (77 = skipped counts as failure here: the guest has
# a device, so a skip means something is wrong).
script='failed=0
for cmd in "$@"; do
  name=$(basename "${cmd%% *}")
  echo "=== $name"
  start=$(date +%s)
  if $cmd; then status=0; else status=$?; fi
  echo "=== $name: exit $status ($(( $(date +%s) - start )) s)"
  [[ $status -eq 0 ]] || failed=1
done
exit $failed'
exec "$repo/tests/rdma_vm/run-in-guest.sh" --timeout "${VSOCKET_RDMA_SUITE_TIMEOUT:-900}" \
  "${env_args[@]}" -- bash -c "$script" run-suite "${bins[@]}"
