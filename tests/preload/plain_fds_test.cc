// Pipes, files, eventfds, AF_UNIX and UDP sockets are untouched by the
// interposer, also when they reuse a closed connection's number
// (progs/plain_fds.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class PlainDescriptors : public testing::TestWithParam<Mode> {};

TEST_P(PlainDescriptors, Unaffected) {
  Result r = RunProgram(GetParam(), "plain_fds", {TempDir()});
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() != Mode::kShm) {
    ExpectPath(GetParam(), r, 46);
    return;
  }
  // fdopen() moves three connections to kernel TCP (their peers follow).
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.shm_connections, 40) << r.err;
  EXPECT_EQ(s.tcp_connections, 6) << r.err;
  EXPECT_EQ(s.Reason("stdio_descriptor"), 3) << r.err;
  EXPECT_EQ(s.Reason("peer_moved_to_tcp"), 3) << r.err;
}

VSP_ALL_MODES(PlainDescriptors);

}  // namespace
}  // namespace vsocket_preload_test
