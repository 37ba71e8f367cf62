// Connections inherited through posix_spawn, system(), popen() and a
// vfork() child's exec, all out of the interposer's reach: the same results as on
// kernel TCP (progs/spawn_inherit.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class SpawnInherit : public testing::TestWithParam<Mode> {};

TEST_P(SpawnInherit, TheNewProgramUsesTheConnectionAsOnKernelTcp) {
  Result r = RunProgram(GetParam(), "spawn_inherit");
  EXPECT_PROGRAM_PASSED(r);
  if (GetParam() == Mode::kShm) {
    // Each of the three connections moved to kernel TCP before its spawn
    // (the program's line; the shells' own lines have nothing to count);
    // the vfork child's (vfork runs as fork) went to its shell on shared
    // memory.
    Stats s = ParseStats(r.err);
    EXPECT_GE(s.Reason("spawn"), 3) << r.err;
    EXPECT_EQ(s.Reason("vfork"), 0) << r.err;
  }
}

VSP_ALL_MODES(SpawnInherit);

}  // namespace
}  // namespace vsocket_preload_test
