// Writing to a peer whose process was killed: one send succeeds and later
// ones fail with EPIPE, or ECONNRESET first when the dead peer left bytes
// unread, as on kernel TCP (progs/killed_peer.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class KilledPeer : public testing::TestWithParam<Mode> {};

TEST_P(KilledPeer, SendsFailAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "killed_peer");
  EXPECT_PROGRAM_PASSED(r);
}

VSP_ALL_MODES(KilledPeer);

}  // namespace
}  // namespace vsocket_preload_test
