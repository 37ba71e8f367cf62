// Shared-memory connections and listeners inherited across exec by a
// preloaded image are handed over (progs/exec_handover.c); a bad
// VSOCKET_INHERITED is logged once and ignored.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class ExecHandover : public testing::TestWithParam<Mode> {};

TEST_P(ExecHandover, InheritedSocketsKeepWorking) {
  Result r = RunProgram(GetParam(), "exec_handover", {}, Ms(90000));
  EXPECT_PROGRAM_PASSED(r);
  // Both echo helpers saw every byte: 4 MiB, then 1000.
  EXPECT_NE(r.out.find("helper echoed=4194304 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("helper echoed=1000 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("helper accepted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("helper timed out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("helper re-exec ok"), std::string::npos) << r.out;
  Stats s = ParseStats(r.err);
  // The parent opens 15 connection ends; the listener helper accepts one;
  // the re-exec'd image of scenario 9 opens two (its line is the only one
  // of that process: the image before exec prints none).  Adopted
  // connections count again in the images that adopt them (the two echo
  // helpers and the timeout helper one each, `true` in scenario 7 and the
  // re-exec'd image two each), but only on shared memory: a kernel-TCP
  // descriptor needs no adopting.  Scenario 3's exec into an image that is
  // not preloaded moves its connection to TCP: both of its ends, here,
  // count as moved.
  switch (GetParam()) {
    case Mode::kShm:
      EXPECT_EQ(s.shm_connections, 15 + 1 + 2 + 3 + 2 + 2 - 2) << r.err;
      EXPECT_EQ(s.tcp_connections, 2) << r.err;
      EXPECT_EQ(s.Reason("exec_not_preloaded") + s.Reason("peer_moved_to_tcp"), 2)
          << r.err;
      break;
    case Mode::kTcp:
      EXPECT_EQ(s.shm_connections, 0) << r.err;
      EXPECT_EQ(s.tcp_connections, 15 + 1 + 2) << r.err;
      break;
    case Mode::kKernel:
      EXPECT_EQ(s.lines, 0) << r.err;
      break;
  }
  // The hostile variable of scenario 6 is reported once, in one line.
  if (GetParam() != Mode::kKernel) {
    size_t first = r.err.find("VSOCKET_INHERITED:");
    EXPECT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("VSOCKET_INHERITED:", first + 1), std::string::npos)
        << r.err;
  }
}

// A thread of the exec'ing process is busy-polling the connection (so the
// reader is not armed for wake-ups) when exec kills it: the new image must
// still be woken by the peer's data.
TEST(ExecHandoverSpin, ReaderSpinningAtExec) {
  Options o;
  o.run_options = {"--spin-us", "1000000"};
  o.env["PTEST_MODE"] = "shm";
  Result r = vsocket_preload_test::Run({ProgramPath("exec_handover"), "execvp"}, o);
  EXPECT_PROGRAM_PASSED(r);
  EXPECT_NE(r.out.find("helper echoed=1000 "), std::string::npos) << r.out;
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.shm_connections, 2 + 1) << r.err;
}

VSP_ALL_MODES(ExecHandover);

// Values a preloaded program may find in its environment at startup; each
// is ignored with one log line, and the program runs normally.
class MalformedInherited : public testing::TestWithParam<std::string> {};

TEST_P(MalformedInherited, IgnoredWithOneLine) {
  Options o;
  o.env["VSOCKET_INHERITED"] = GetParam();
  Result r = vsocket_preload_test::Run({ProgramPath("exec_handover"), "malformed"}, o);
  EXPECT_PROGRAM_PASSED(r);
  size_t first = r.err.find("VSOCKET_INHERITED:");
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("VSOCKET_INHERITED:", first + 1), std::string::npos)
      << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Values, MalformedInherited,
    testing::Values("garbage", "2;shm,c,3,4,5,6,7", "1;", "1;bogus,1,2",
                    "1;shm,c,0,1,2,x,5", "1;shm,q,600,601,602,603,604",
                    "1;shm,c,0,1,2,0,1", "1;shm,s,1,2,0,3,99999999999",
                    "1;listen,-1,1", "1;listen,0,2+2", "1;shm,c,,,,,",
                    std::string(5000, ';')),
    [](const testing::TestParamInfo<std::string>& param) {
      return "v" + std::to_string(param.index);
    });

}  // namespace
}  // namespace vsocket_preload_test
