// epoll registrations made with a descriptor that is then duplicated and
// closed live on with the open file, as the kernel keys them
// (progs/dup_epoll.c): every observation equal to kernel TCP's.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class DupEpoll : public testing::TestWithParam<Mode> {};

TEST_P(DupEpoll, SameAsKernel) {
  Result r = RunAndCompareWithKernel(GetParam(), "dup_epoll");
  ExpectPath(GetParam(), r, 30);
}

VSP_ALL_MODES(DupEpoll);

}  // namespace
}  // namespace vsocket_preload_test
