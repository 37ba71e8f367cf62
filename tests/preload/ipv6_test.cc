// IPv6 loopback and IPv4-mapped addresses (progs/ipv6.c).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class Ipv6 : public testing::TestWithParam<Mode> {};

TEST_P(Ipv6, Passes) {
  Result r = RunProgram(GetParam(), "ipv6", {});
  EXPECT_PROGRAM_PASSED(r);
  ExpectPath(GetParam(), r, 6);
}

VSP_ALL_MODES(Ipv6);

}  // namespace
}  // namespace vsocket_preload_test
