// _FORTIFY_SOURCE builds: __read_chk, __recv_chk, __recvfrom_chk (progs/fortify.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Fortify : public testing::TestWithParam<Mode> {};

TEST_P(Fortify, Passes) {
  Result r = RunProgram(GetParam(), "fortify", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(Fortify);

}  // namespace
}  // namespace vsocket_preload_test
