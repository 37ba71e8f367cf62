// SO_RCVTIMEO and SO_SNDTIMEO: EAGAIN after the timeout (progs/timeouts.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Timeouts : public testing::TestWithParam<Mode> {};

TEST_P(Timeouts, Passes) {
  Result r = RunProgram(GetParam(), "timeouts", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(Timeouts);

}  // namespace
}  // namespace vsocket_preload_test
