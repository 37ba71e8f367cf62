// epoll LT, EPOLLET, EPOLLONESHOT and EPOLLEXCLUSIVE on sets mixing a
// connection with a pipe, an eventfd and an AF_UNIX socketpair; and a
// socket registered before connect() (progs/epoll_modes.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Epoll : public testing::TestWithParam<Mode> {
 protected:
  void RunMode(const std::string& mode) {
    Result r = RunProgram(GetParam(), "epoll_modes", {mode});
    EXPECT_PROGRAM_PASSED(r);
    ExpectPath(GetParam(), r, 2);
  }
};

TEST_P(Epoll, LevelTriggered) { RunMode("lt"); }
TEST_P(Epoll, EdgeTriggered) { RunMode("et"); }
TEST_P(Epoll, OneShot) { RunMode("oneshot"); }
TEST_P(Epoll, Exclusive) { RunMode("exclusive"); }
TEST_P(Epoll, RegisteredBeforeConnect) { RunMode("preconnect"); }

// epoll_wait/epoll_pwait/epoll_pwait2 on a set the interposer busy-polls:
// timeouts, data, EINTR through the sigmask, EINVAL (progs/epoll_wait_spin.c).
TEST_P(Epoll, WaitVariantsKeepKernelSemantics) {
  Result r = RunProgram(GetParam(), "epoll_wait_spin");
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

// A signal handled while epoll_wait busy-polls (a 1 s budget, so the signal
// lands in the spin) ends it with EINTR at once (progs/epoll_wait_spin.c).
TEST_P(Epoll, SignalDuringTheSpinInterruptsTheWait) {
  Result r = RunProgram(GetParam(), "epoll_wait_spin", {"signal-in-spin"},
                        Ms(40000), {{"VSOCKET_SPIN_US", "1000000"}});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

// A shared-memory offer the listener does not claim in time falls back to
// TCP under the application's descriptor number; its epoll registration
// follows (progs/epoll_fallback.c).
TEST_P(Epoll, RegistrationFollowsFallbackToTcp) {
  Result r = RunProgram(GetParam(), "epoll_fallback", {}, Ms(40000),
                        {{"VSOCKET_CLAIM_TIMEOUT_MS", "200"}});
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.Reason("claim_timeout"), 1) << r.err;
    EXPECT_EQ(s.shm_connections, 0) << r.err;
  } else {
    ExpectPath(GetParam(), r, 2);
  }
}

// POLLRDHUP/EPOLLRDHUP and POLLHUP/EPOLLHUP at end of stream, half-close,
// reset and peer death (progs/hangup.c).
TEST_P(Epoll, HangupEvents) {
  Result r = RunProgram(GetParam(), "hangup");
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 14);
}

VSP_ALL_MODES(Epoll);

}  // namespace
}  // namespace vsocket_preload_test
