// A listener closed with a written-to connection in its backlog: the
// client sees the reset once, then end of stream and EPIPE, as on kernel
// TCP (progs/listener_closed.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class ListenerClosed : public testing::TestWithParam<Mode> {};

TEST_P(ListenerClosed, TheClientSeesTheResetNotAnEndOfStream) {
  Result r = RunProgram(GetParam(), "listener_closed");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    // Both offers went unclaimed and moved to TCP when the reset came.
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.Reason("peer_spoke_tcp"), 2) << r.err;
  }
}

VSP_ALL_MODES(ListenerClosed);

}  // namespace
}  // namespace vsocket_preload_test
