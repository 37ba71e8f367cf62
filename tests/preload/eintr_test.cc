// A signal interrupts a blocked call: EINTR without SA_RESTART, a
// transparent restart with it (progs/eintr.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Eintr : public testing::TestWithParam<Mode> {};

TEST_P(Eintr, WithoutSaRestartFailsWithEintr) {
  Result r = RunProgram(GetParam(), "eintr", {"norestart"});
  EXPECT_PROGRAM_PASSED(r);
  EXPECT_NE(r.out.find("signals=3"), std::string::npos) << r.out;
  ExpectPath(GetParam(), r, 2);
}

// recv and send are restarted; signal()'s BSD handlers restart too; a
// socket with SO_RCVTIMEO still gets EINTR; sigaction() queries see the
// application's own handler.
TEST_P(Eintr, WithSaRestartRestarts) {
  Result r = RunProgram(GetParam(), "eintr", {"restart"});
  EXPECT_PROGRAM_PASSED(r);
  EXPECT_NE(r.out.find("restart_result=4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("restart_checks=ok"), std::string::npos) << r.out;
  ExpectPath(GetParam(), r, 2);
}

// A signal at any moment of epoll_wait, poll or select (vsocket's spin, its
// end, the kernel's sleep) ends the call with EINTR, 1000 times each.
TEST_P(Eintr, ASignalAnywhereInAWaitEndsIt) {
  Result r = RunProgram(GetParam(), "eintr", {"waits"});
  EXPECT_PROGRAM_PASSED(r);
  for (const char* wait : {"epoll_wait", "poll", "select"})
    EXPECT_NE(r.out.find(std::string(wait) + "_rounds=1000"), std::string::npos) << r.out;
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(Eintr);

}  // namespace
}  // namespace vsocket_preload_test
