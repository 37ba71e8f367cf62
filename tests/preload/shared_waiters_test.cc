// Two threads blocked on one socket, reading and writing (progs/shared_waiters.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class SharedWaiters : public testing::TestWithParam<Mode> {};

TEST_P(SharedWaiters, Passes) {
  Result r = RunProgram(GetParam(), "shared_waiters", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 2);
}

VSP_ALL_MODES(SharedWaiters);

}  // namespace
}  // namespace vsocket_preload_test
