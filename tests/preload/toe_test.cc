// The toe transport under the interposer: the same C programs the other
// drivers run (progs/), through `vsocket-run --transport toe`, must pass as
// they do on kernel TCP, with every connection end on toe.  Among them the
// fork and exec cases: a forked child's socket works, an exec'd image gets
// the kernel socket with nothing lost or repeated.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

// Connection ends the stats lines of all processes count on toe.
int64_t ToeConnections(const std::string& err) {
  int64_t total = 0;
  for (size_t at = err.find("\"toe\":{"); at != std::string::npos;
       at = err.find("\"toe\":{", at + 1)) {
    size_t c = err.find("\"connections\":", at);
    if (c != std::string::npos) total += std::strtoll(err.c_str() + c + 14, nullptr, 10);
  }
  return total;
}

struct Case {
  const char* name;     // the test's name
  const char* program;  // progs/<program>.c
  const char* arg;      // its one argument, or nullptr; "@tmp": a scratch directory
  // VSOCKET_TOE_READAHEAD_INHERITABLE=1 (read ahead on descriptors
  // without FD_CLOEXEC too), and the run must show read-ahead served.
  bool readahead = false;
  // The image that held toe connections execs at the end: the stats line
  // is the new image's, which has none.
  bool ends_in_exec = false;
};

Result RunOnToe(const Case& c) {
  Options o;
  o.run_options = {"--transport", "toe"};
  // Expectations as on kernel TCP (the descriptor is the TCP socket).
  o.env["PTEST_MODE"] = "tcp";
  if (c.readahead) o.env["VSOCKET_TOE_READAHEAD_INHERITABLE"] = "1";
  std::vector<std::string> args = {ProgramPath(c.program)};
  if (c.arg) args.push_back(std::string(c.arg) == "@tmp" ? testing::TempDir() : c.arg);
  return Run(args, o, Ms(40000));
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Toe : public testing::TestWithParam<Case> {};

TEST_P(Toe, ProgramPassesWithEveryEndOnToe) {
  Result r = RunOnToe(GetParam());
  EXPECT_PROGRAM_PASSED(r);
  Stats s = ParseStats(r.err);
  EXPECT_GE(s.lines, 1) << r.err;
  EXPECT_EQ(s.shm_connections, 0) << r.err;
  if (!GetParam().ends_in_exec) {
    EXPECT_GT(ToeConnections(r.err), 0) << r.err;
  }
  EXPECT_EQ(s.Reason("io_uring_unavailable"), 0) << r.err;
  if (GetParam().readahead && !GetParam().ends_in_exec) {
    size_t at = r.err.find("\"window_bytes\":");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_GT(std::strtoll(r.err.c_str() + at + 15, nullptr, 10), 0) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Programs, Toe,
    testing::Values(Case{"io_blocking", "io_blocking", nullptr},
                    Case{"io_nonblocking", "io_nonblocking", nullptr},
                    Case{"eintr", "eintr", nullptr},
                    Case{"timeouts", "timeouts", nullptr},
                    Case{"msg_flags", "msg_flags", nullptr},
                    Case{"fork_handoff", "fork_handoff", nullptr},
                    Case{"burst_then_exit", "burst_then_exit", nullptr},
                    Case{"exec_inherit", "exec_inherit", nullptr},
                    Case{"readiness", "readiness", nullptr},
                    Case{"closed_peer", "closed_peer", nullptr},
                    Case{"hangup", "hangup", nullptr},
                    Case{"dup", "dup", nullptr},
                    Case{"dup_epoll", "dup_epoll", nullptr},
                    Case{"rcvlowat", "rcvlowat", nullptr},
                    Case{"epoll_lt", "epoll_modes", "lt"},
                    Case{"epoll_et", "epoll_modes", "et"},
                    Case{"epoll_oneshot", "epoll_modes", "oneshot"},
                    Case{"epoll_exclusive", "epoll_modes", "exclusive"},
                    Case{"epoll_preconnect", "epoll_modes", "preconnect"},
                    Case{"epoll_wait_spin", "epoll_wait_spin", nullptr},
                    Case{"poll_mix_poll", "poll_mix", "poll"},
                    Case{"poll_mix_select", "poll_mix", "select"},
                    Case{"epoll_sets_threads", "epoll_sets", "threads"},
                    Case{"epoll_sets_fork", "epoll_sets", "fork"},
                    Case{"epoll_sets_hangup", "epoll_sets", "hangup"},
                    Case{"epoll_fallback", "epoll_fallback", nullptr},
                    Case{"shared_waiters", "shared_waiters", nullptr},
                    Case{"nb_connect", "nb_connect", nullptr},
                    Case{"buffer_sizes", "buffer_sizes", nullptr},
                    Case{"plain_fds", "plain_fds", nullptr},
                    Case{"zerocopy", "zerocopy", "@tmp"},
                    // Bytes read ahead, then the socket shared by fork or
                    // handed to an exec'd image: nothing lost or repeated.
                    Case{"readahead_fork", "readahead_handoff", "fork-only", true},
                    Case{"readahead_fork_exec", "readahead_handoff", nullptr, true, true}),
    [](const testing::TestParamInfo<Case>& param) {
      return std::string(param.param.name);
    });

}  // namespace
}  // namespace vsocket_preload_test
