// SO_SNDBUF and SO_RCVBUF bound the bytes in flight on every path, as on
// kernel TCP, set before or after connect, raised later; a writer whose
// peer closes mid-transfer gets the reset (progs/buffer_sizes.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class BufferSizes : public testing::TestWithParam<Mode> {};

TEST_P(BufferSizes, BoundTheBytesInFlight) {
  Result r = RunProgram(GetParam(), "buffer_sizes", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 6);
}

VSP_ALL_MODES(BufferSizes);

}  // namespace
}  // namespace vsocket_preload_test
