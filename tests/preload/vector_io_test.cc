// preadv2/pwritev2 and preadv/pwritev on sockets, as the kernel answers
// them (progs/vector_io.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class VectorIo : public testing::TestWithParam<Mode> {};

TEST_P(VectorIo, OffsetMinusOneIsTheStreamAndOthersAreRefused) {
  Result r = RunProgram(GetParam(), "vector_io");
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(VectorIo);

}  // namespace
}  // namespace vsocket_preload_test
