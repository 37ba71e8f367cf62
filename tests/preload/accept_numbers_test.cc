// accept() and socket() return the numbers kernel TCP gives: the lowest
// free one (progs/accept_numbers.c), every observation equal to kernel TCP's.
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class AcceptNumbers : public testing::TestWithParam<Mode> {};

TEST_P(AcceptNumbers, SameAsKernel) {
  Result r = RunAndCompareWithKernel(GetParam(), "accept_numbers");
  ExpectPath(GetParam(), r, 6);
}

VSP_ALL_MODES(AcceptNumbers);

}  // namespace
}  // namespace vsocket_preload_test
