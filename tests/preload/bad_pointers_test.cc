// Bad pointers are EFAULT under the interposer, and its fault guard is
// invisible to the program (progs/bad_pointers.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class BadPointers : public testing::TestWithParam<Mode> {};

TEST_P(BadPointers, AreEfaultAndTheProgramsOwnHandlerStillRuns) {
  Result r = RunProgram(GetParam(), "bad_pointers");
  EXPECT_PROGRAM_PASSED(r);
  Stats s = ParseStats(r.err);
  // The pair, and a client whose accept() failed with EFAULT (the kernel
  // dropped its connection): on shared memory that client's offer ends on
  // TCP, revoked at its close (offer_revoked), or, when a call saw the
  // kernel's reset on its TCP socket first, peer_spoke_tcp.
  switch (GetParam()) {
    case Mode::kShm:
      EXPECT_EQ(s.shm_connections, 2) << r.err;
      EXPECT_EQ(s.tcp_connections, 1) << r.err;
      EXPECT_EQ(s.Reason("offer_revoked") + s.Reason("peer_spoke_tcp"), 1) << r.err;
      break;
    case Mode::kTcp:
      EXPECT_EQ(s.tcp_connections, 3) << r.err;
      EXPECT_EQ(s.Reason("disabled_by_config"), 3) << r.err;
      break;
    case Mode::kKernel:
      EXPECT_EQ(s.lines, 0) << r.err;
      break;
  }
}

VSP_ALL_MODES(BadPointers);

}  // namespace
}  // namespace vsocket_preload_test
