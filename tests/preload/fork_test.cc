// Fork-per-connection servers: the parent closes its copy right after
// fork(); the child's data and end of stream still reach the peer
// (progs/fork_handoff.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Fork : public testing::TestWithParam<Mode> {};

TEST_P(Fork, ParentClosesChildServes) {
  Result r = RunProgram(GetParam(), "fork_handoff");
  EXPECT_PROGRAM_PASSED(r);
  // The parent's own line: 20 connections, two ends each (the children
  // leave with _exit and print none).  On shared memory each of the 10
  // grandchildren that exec `true` adopts the connection it inherits and
  // counts it in its own line.
  ExpectPath(GetParam(), r, GetParam() == Mode::kShm ? 40 + 10 : 40);
}

VSP_ALL_MODES(Fork);

}  // namespace
}  // namespace vsocket_preload_test
