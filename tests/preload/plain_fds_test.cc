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
  ExpectPath(GetParam(), r, 46);
}

VSP_ALL_MODES(PlainDescriptors);

}  // namespace
}  // namespace vsocket_preload_test
