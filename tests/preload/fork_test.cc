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
  // leave with _exit and print none).
  ExpectPath(GetParam(), r, 40);
}

VSP_ALL_MODES(Fork);

}  // namespace
}  // namespace vsocket_preload_test
