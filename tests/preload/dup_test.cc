// dup, dup2, dup3, F_DUPFD*: copies of a connection's descriptor (progs/dup.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Dup : public testing::TestWithParam<Mode> {};

TEST_P(Dup, Passes) {
  Result r = RunProgram(GetParam(), "dup", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 10);
}

VSP_ALL_MODES(Dup);

}  // namespace
}  // namespace vsocket_preload_test
