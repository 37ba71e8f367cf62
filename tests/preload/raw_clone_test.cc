// A connection shared with a child made by a raw clone (syscall(SYS_clone)
// and glibc's clone()), whose parent closes its copy at once: the same
// results as on kernel TCP (progs/raw_clone.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class RawClone : public testing::TestWithParam<Mode> {};

TEST_P(RawClone, TheChildKeepsTheConnectionAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "raw_clone");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    // Each connection moved to kernel TCP before its clone, and said why.
    Stats s = ParseStats(r.err);
    EXPECT_GE(s.Reason("clone"), 2) << r.err;
  }
}

VSP_ALL_MODES(RawClone);

}  // namespace
}  // namespace vsocket_preload_test
