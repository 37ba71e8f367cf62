// exec with connections open: an inherited connection works in the new
// (preloaded) image, a close-on-exec one stays the parent's
// (progs/exec_inherit.c; exec_handover_test.cc has the rest).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Exec : public testing::TestWithParam<Mode> {};

TEST_P(Exec, InheritedConnections) {
  Result r = RunProgram(GetParam(), "exec_inherit");
  EXPECT_PROGRAM_PASSED(r);
  // Four ends in the parent.  On shared memory the exec'd images adopt
  // what they inherit and count it again: the child both ends of the first
  // pair (neither is close-on-exec), `true` the client end of the second.
  ExpectPath(GetParam(), r, GetParam() == Mode::kShm ? 4 + 2 + 1 : 4);
  EXPECT_NE(r.out.find("child_read=4"), std::string::npos) << r.out;
}

VSP_ALL_MODES(Exec);

}  // namespace
}  // namespace vsocket_preload_test
