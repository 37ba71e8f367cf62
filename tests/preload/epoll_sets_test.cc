// epoll semantics over the user-space readiness of fast-path connections,
// each compared with the kernel's for TCP (progs/epoll_sets.c): fair
// rotation under a small maxevents, one connection in two threads' sets,
// nested sets, a set inherited across fork, registrations through dup'd
// numbers, an EPOLLOUT-only set beside a blocked reader, EPOLLET bursts
// and hang-up events.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class EpollSets : public testing::TestWithParam<Mode> {
 protected:
  void RunMode(const std::string& mode, int connections) {
    Result r = RunProgram(GetParam(), "epoll_sets", {mode});
    EXPECT_PROGRAM_PASSED(r);
    ExpectPath(GetParam(), r, connections);
  }
};

TEST_P(EpollSets, FairRotationWhenMaxeventsIsSmall) { RunMode("rotation", 8); }
TEST_P(EpollSets, OneConnectionInTwoThreadsSets) { RunMode("threads", 2); }
TEST_P(EpollSets, NestedSets) { RunMode("nested", 2); }
TEST_P(EpollSets, ChildInheritsTheSet) { RunMode("fork", 2); }
TEST_P(EpollSets, RegistrationThroughDupSurvivesClose) { RunMode("dup-close", 2); }
TEST_P(EpollSets, WritableOnlySetNeverStarvesABlockedReader) {
  RunMode("out-only", 2);
}
TEST_P(EpollSets, EdgeTriggeredBurstIsOneEdge) { RunMode("et-burst", 2); }
TEST_P(EpollSets, HangupEventsMatchTheKernel) { RunMode("hangup", 2); }

VSP_ALL_MODES(EpollSets);

}  // namespace
}  // namespace vsocket_preload_test
