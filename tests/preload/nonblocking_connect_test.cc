// Non-blocking connect, POLLOUT and SO_ERROR; refused connects (progs/nb_connect.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class NonblockingConnect : public testing::TestWithParam<Mode> {};

TEST_P(NonblockingConnect, Passes) {
  Result r = RunProgram(GetParam(), "nb_connect", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 6);
}

VSP_ALL_MODES(NonblockingConnect);

}  // namespace
}  // namespace vsocket_preload_test
