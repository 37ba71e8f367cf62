// poll and select over a connection beside a pipe, compared with the
// kernel's answers for TCP (progs/poll_mix.c): members reporting alone and
// together, timeouts, POLLNVAL and EBADF, end of stream and hang-up.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class PollMix : public testing::TestWithParam<Mode> {};

TEST_P(PollMix, PollAnswersAsTheKernel) {
  Result r = RunProgram(GetParam(), "poll_mix", {"poll"});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

TEST_P(PollMix, SelectAnswersAsTheKernel) {
  Result r = RunProgram(GetParam(), "poll_mix", {"select"});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(PollMix);

}  // namespace
}  // namespace vsocket_preload_test
