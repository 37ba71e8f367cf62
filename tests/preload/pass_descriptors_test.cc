// Connections and listeners passed in SCM_RIGHTS messages, to a forked
// receiver and to a plain (not preloaded) one: the same results as on
// kernel TCP (progs/pass_descriptors.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class PassDescriptors : public testing::TestWithParam<Mode> {};

TEST_P(PassDescriptors, WorkInTheReceiverAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "pass_descriptors");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    Stats s = ParseStats(r.err);
    // Three connections passed per receiver: each moved to kernel TCP
    // before it left.  The peers of the two accepted ones followed
    // (peer_moved_to_tcp); the client passed before its server accepted
    // (in an unpadded message) withdrew its offer, so the accept found
    // none (peer_not_vsocket).
    EXPECT_EQ(s.Reason("descriptor_passed"), 6) << r.err;
    EXPECT_EQ(s.Reason("peer_moved_to_tcp"), 4) << r.err;
    // The forked receiver accepted on both passed listeners over shared
    // memory (it bound the marker the sender gave up): two connections,
    // an end in each process.  The plain receiver's clients found no
    // marker and took TCP at once, never waiting for a claim.
    EXPECT_EQ(s.shm_connections, 4) << r.err;
    EXPECT_EQ(s.Reason("peer_not_vsocket"), 2 + 2) << r.err;
    EXPECT_EQ(s.Reason("claim_timeout"), 0) << r.err;
  }
}

VSP_ALL_MODES(PassDescriptors);

}  // namespace
}  // namespace vsocket_preload_test
