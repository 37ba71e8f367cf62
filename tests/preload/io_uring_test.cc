// A program that does its socket I/O through io_uring (liburing's accept,
// recv and send): works as on kernel TCP, its connections on kernel TCP
// with reason io_uring, and no client waits for a claim
// (progs/io_uring_echo.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class IoUring : public testing::TestWithParam<Mode> {};

TEST_P(IoUring, SocketsUsedThroughARingWorkAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "io_uring_echo");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    // The server's end of the old connection moved when the ring started
    // (the ring's accepts are the kernel's: vsocket never sees them).  The
    // client leaves with _exit(), which prints no line.
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.Reason("io_uring"), 1) << r.err;
  }
}

VSP_ALL_MODES(IoUring);

}  // namespace
}  // namespace vsocket_preload_test
