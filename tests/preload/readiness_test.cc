// poll(), ppoll() and select() report a connection readable only when there
// is something to read: a stale doorbell wake-up is filtered out, real data
// never is (progs/readiness.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Readiness : public testing::TestWithParam<Mode> {};

TEST_P(Readiness, NoReadinessWithoutData) {
  Result r = RunProgram(GetParam(), "readiness");
  EXPECT_PROGRAM_PASSED(r);
  EXPECT_NE(r.out.find("spurious=0"), std::string::npos) << r.out;
  if (GetParam() == Mode::kShm) {
    EXPECT_NE(r.out.find("stale_wakeups=filtered"), std::string::npos) << r.out;
  }
  ExpectPath(GetParam(), r, 4);
}

VSP_ALL_MODES(Readiness);

}  // namespace
}  // namespace vsocket_preload_test
