#!/bin/bash
# Runs tests/rdma/rdma_channel_test inside the Soft-RoCE QEMU guest
# (tests/rdma_vm/run-in-guest.sh).  The binary must already be built.
#
#   tests/rdma/run.sh [BUILD_DIR]          default BUILD_DIR: <repo>/build
#   VSOCKET_RDMA_TEST_MB=32 tests/rdma/run.sh /tmp/build-rdma   smaller bulk
#   VSOCKET_RDMA_TEST_ONLY="kill qperr" tests/rdma/run.sh build  some scenarios
#
# Exit status: the test's (0 pass, 1 fail, 77 skipped: no device), 124 when
# the guest hit the deadline, 125 when the harness failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$repo/build}"
bin="$(cd "$build" && pwd)/tests/rdma/rdma_channel_test"
if [[ ! -x "$bin" ]]; then
  echo "run.sh: $bin not built (cmake --build $build --target rdma_channel_test)" >&2
  exit 2
fi
env_args=()
for var in VSOCKET_RDMA_TEST_MB VSOCKET_RDMA_TEST_ONLY; do
  if [[ -n "${!var:-}" ]]; then env_args+=(--env "$var=${!var}"); fi
done
exec "$repo/tests/rdma_vm/run-in-guest.sh" --timeout "${VSOCKET_RDMA_TEST_TIMEOUT:-600}" \
  "${env_args[@]}" -- "$bin"
