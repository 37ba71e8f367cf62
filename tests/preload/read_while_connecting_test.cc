// A read on a client socket while another thread is still inside its
// connect() (scripts/read_while_connecting.py).  The number names the
// kernel TCP socket, then the wait socket, until connect() sets the
// transport: a read there got the liveness connection's reset
// (ECONNRESET) or a wake-up byte (b'\x00') where kernel TCP gives end of
// stream, in about 1 round in 8 (CPython's TCPCloserTest failed so, 1 run
// in 3).  It now waits for the connecting thread.
#include <gtest/gtest.h>

#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class ReadWhileConnecting : public testing::TestWithParam<Mode> {};

TEST_P(ReadWhileConnecting, TheReaderSeesTheEndOfStreamAsOnKernelTcp) {
  Options o;
  o.preload = GetParam() != Mode::kKernel;
  if (GetParam() == Mode::kTcp) o.run_options = {"--transport", "tcp"};
  o.env["VSOCKET_SHORT_CALLS"] = "0";
  Result r = vsocket_preload_test::Run(
      {Python3(), std::string(VSP_SCRIPT_DIR) + "/read_while_connecting.py", "100"}, o,
      Ms(60000));
  EXPECT_TRUE(r.exit.Ok()) << r.exit.ToString() << r.out << r.err;
  EXPECT_NE(r.out.find("bad 0 of 100"), std::string::npos) << r.out << r.err;
  if (GetParam() == Mode::kShm) {
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.shm_connections, 200) << r.err;
    EXPECT_EQ(s.tcp_connections, 0) << r.err;
  }
}

VSP_ALL_MODES(ReadWhileConnecting);

}  // namespace
}  // namespace vsocket_preload_test
