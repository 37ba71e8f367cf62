// Registration changes on busy-polled epoll sets, which vsocket hands to
// the kernel lazily (preload/epoll_set.h), each compared with the
// kernel's behaviour for TCP (progs/epoll_changes.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class EpollChanges : public testing::TestWithParam<Mode> {
 protected:
  void RunMode(const std::string& mode) {
    Result r = RunProgram(GetParam(), "epoll_changes", {mode});
    EXPECT_PROGRAM_PASSED(r);
    ExpectPath(GetParam(), r, 2);
  }
};

TEST_P(EpollChanges, DeleteAddModifyCyclesReportWhatIsRegistered) { RunMode("cycle"); }
TEST_P(EpollChanges, ASleepingWaiterSeesAnotherThreadsChange) { RunMode("sleeper"); }
TEST_P(EpollChanges, AChangedSetPutInAnotherSetIsReportedAtOnce) { RunMode("nested"); }

VSP_ALL_MODES(EpollChanges);

}  // namespace
}  // namespace vsocket_preload_test
