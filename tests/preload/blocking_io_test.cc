// Blocking I/O through every data call (progs/io_blocking.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class BlockingIo : public testing::TestWithParam<Mode> {};

TEST_P(BlockingIo, Passes) {
  Result r = RunProgram(GetParam(), "io_blocking", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(BlockingIo);

}  // namespace
}  // namespace vsocket_preload_test
