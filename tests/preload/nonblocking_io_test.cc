// O_NONBLOCK, FIONBIO, SOCK_NONBLOCK, EAGAIN and poll() readiness (progs/io_nonblocking.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class NonblockingIo : public testing::TestWithParam<Mode> {};

TEST_P(NonblockingIo, Passes) {
  Result r = RunProgram(GetParam(), "io_nonblocking", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 6);
}

VSP_ALL_MODES(NonblockingIo);

}  // namespace
}  // namespace vsocket_preload_test
