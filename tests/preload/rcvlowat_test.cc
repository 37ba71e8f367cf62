// SO_RCVLOWAT in poll, ppoll, select, pselect, epoll (level and edge),
// blocking and non-blocking recv, MSG_PEEK, MSG_WAITALL, and getsockopt
// (progs/rcvlowat.c): every observation equal to kernel TCP's.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class RcvLowat : public testing::TestWithParam<Mode> {};

TEST_P(RcvLowat, SameAsKernel) {
  Result r = RunAndCompareWithKernel(GetParam(), "rcvlowat");
  ExpectPath(GetParam(), r, 18);
}

VSP_ALL_MODES(RcvLowat);

}  // namespace
}  // namespace vsocket_preload_test
