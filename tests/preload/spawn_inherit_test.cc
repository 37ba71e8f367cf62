// Connections inherited through posix_spawn, system() and popen(), whose
// exec libc makes out of the interposer's sight: the same results as on
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
    // (the program's line; the shells' own lines have nothing to count).
    Stats s = ParseStats(r.err);
    EXPECT_GE(s.Reason("spawn"), 3) << r.err;
  }
}

VSP_ALL_MODES(SpawnInherit);

}  // namespace
}  // namespace vsocket_preload_test
