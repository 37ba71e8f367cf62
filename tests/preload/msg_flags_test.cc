// MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL and MSG_NOSIGNAL (progs/msg_flags.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class MsgFlags : public testing::TestWithParam<Mode> {};

TEST_P(MsgFlags, Passes) {
  Result r = RunProgram(GetParam(), "msg_flags", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 4);
}

VSP_ALL_MODES(MsgFlags);

}  // namespace
}  // namespace vsocket_preload_test
