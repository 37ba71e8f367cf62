// exec with connections open: a forked child that execs stops holding them,
// an inherited shared-memory connection fails cleanly in the new image
// (progs/exec_inherit.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Exec : public testing::TestWithParam<Mode> {};

TEST_P(Exec, InheritedConnections) {
  Result r = RunProgram(GetParam(), "exec_inherit");
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 4);
  if (GetParam() == Mode::kShm) {
    EXPECT_NE(r.out.find("child_read=-1 errno=" + std::string(strerror(ECONNRESET))),
              std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("child_read=4"), std::string::npos) << r.out;
  }
}

VSP_ALL_MODES(Exec);

}  // namespace
}  // namespace vsocket_preload_test
