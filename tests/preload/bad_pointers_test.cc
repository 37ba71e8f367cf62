// Bad pointers are EFAULT under the interposer, and its fault guard is
// invisible to the program (progs/bad_pointers.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class BadPointers : public testing::TestWithParam<Mode> {};

TEST_P(BadPointers, AreEfaultAndTheProgramsOwnHandlerStillRuns) {
  Result r = RunProgram(GetParam(), "bad_pointers");
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(BadPointers);

}  // namespace
}  // namespace vsocket_preload_test
