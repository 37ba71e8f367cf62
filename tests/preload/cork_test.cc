// TCP_CORK and MSG_MORE hold a send as kernel TCP does: until the cork is
// out, a send without MSG_MORE, TCP_NODELAY, shutdown, ~200 ms, or the
// writer's death, which still delivers them (progs/cork.c): every
// observation equal to kernel TCP's.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Cork : public testing::TestWithParam<Mode> {};

TEST_P(Cork, SameAsKernel) {
  Result r = RunAndCompareWithKernel(GetParam(), "cork");
  if (GetParam() != Mode::kShm) {
    ExpectPath(GetParam(), r, 14);
    return;
  }
  // Only the reader reports (the writers leave with _exit or SIGKILL):
  // the ends it made, all on shared memory, and the 29 bytes it read.
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.shm_connections, 14) << r.err;
  EXPECT_EQ(s.tcp_connections, 0) << r.err;
  EXPECT_EQ(s.shm_received, 29) << r.err;
}

VSP_ALL_MODES(Cork);

}  // namespace
}  // namespace vsocket_preload_test
