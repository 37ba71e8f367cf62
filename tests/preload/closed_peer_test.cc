// Writing to a peer that closed: one send succeeds, the peer's last bytes
// and end of stream are read, then EPIPE, as kernel TCP (progs/closed_peer.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class ClosedPeer : public testing::TestWithParam<Mode> {};

TEST_P(ClosedPeer, OneSendSucceedsThenEpipe) {
  Result r = RunProgram(GetParam(), "closed_peer", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 4);
}

VSP_ALL_MODES(ClosedPeer);

}  // namespace
}  // namespace vsocket_preload_test
