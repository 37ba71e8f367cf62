// main() of rdma_conformance_test: exits 77 (ctest SKIP; a failure in
// tests/rdma/run-suite.sh's guest) when no RDMA device exists, else runs
// the conformance cases on kernel and rdma.
#include <gtest/gtest.h>

#include <cstdio>

#include "scenario_harness.h"

int main(int argc, char** argv) {
  if (!vsocket_rdma_test::HaveDevice()) {
    printf("SKIP: no RDMA device (run in the guest: tests/rdma/run-suite.sh)\n");
    return vsocket_rdma_test::kSkipExitCode;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
