// sendfile and splice with a connection at one end, and the kernel's
// EINVAL/EAGAIN where it refuses (progs/zerocopy.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class ZeroCopy : public testing::TestWithParam<Mode> {};

TEST_P(ZeroCopy, SendfileAndSplice) {
  Result r = RunProgram(GetParam(), "zerocopy", {TempDir()});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
  if (GetParam() != Mode::kKernel) {
    // sendfile/splice bytes are counted like any other (3 MiB + ...).
    Stats s = ParseStats(r.err);
    int64_t sent = GetParam() == Mode::kShm ? s.shm_sent : s.tcp_sent;
    EXPECT_GE(sent, 3 << 20) << r.err;
  }
}

VSP_ALL_MODES(ZeroCopy);

}  // namespace
}  // namespace vsocket_preload_test
