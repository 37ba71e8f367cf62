// MSG_ZEROCOPY completions as kernel TCP queues them: vsocket moves such
// connections to kernel TCP with reason `zerocopy` (progs/msg_zerocopy.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class MsgZeroCopy : public testing::TestWithParam<Mode> {};

TEST_P(MsgZeroCopy, CompletionsArriveAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "msg_zerocopy");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    // The two client ends moved (or stayed, for the one set before
    // connect) to kernel TCP, and said why.
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.Reason("zerocopy"), 2) << r.err;
  }
}

VSP_ALL_MODES(MsgZeroCopy);

}  // namespace
}  // namespace vsocket_preload_test
