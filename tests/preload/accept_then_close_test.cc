// A non-blocking connect() to a server that accepts and closes at once, and
// a dup() (CPython's socket.dup(): F_DUPFD_CLOEXEC from 0) of a connection
// whose peer sent and closed: the same results as kernel TCP
// (scripts/accept_then_close.py).  Before: connect() failed with
// ECONNRESET in about 1 round in 5, and the copy moved the connection to
// TCP (reason stdio_descriptor) and sometimes reset it with unread bytes.
// VSOCKET_SHORT_CALLS=0 keeps every connection on the fast path (these are
// short ones).
#include "program_test.h"

namespace vsocket_preload_test {
namespace {

class AcceptThenClose : public testing::TestWithParam<Mode> {};

TEST_P(AcceptThenClose, ConnectSucceedsAndCopiesReadTheBytes) {
  Options o;
  o.preload = GetParam() != Mode::kKernel;
  if (GetParam() == Mode::kTcp) o.run_options = {"--transport", "tcp"};
  o.env["VSOCKET_SHORT_CALLS"] = "0";
  Result r = vsocket_preload_test::Run(
      {Python3(), std::string(VSP_SCRIPT_DIR) + "/accept_then_close.py", "150"}, o,
      Ms(60000));
  EXPECT_TRUE(r.exit.Ok()) << r.exit.ToString() << r.out << r.err;
  EXPECT_NE(r.out.find("bad 0 of 300"), std::string::npos) << r.out << r.err;
  if (GetParam() == Mode::kShm) {
    Stats s = ParseStats(r.err);
    EXPECT_EQ(s.shm_connections, 600) << r.err;
    EXPECT_EQ(s.tcp_connections, 0) << r.err;
  }
}

VSP_ALL_MODES(AcceptThenClose);

}  // namespace
}  // namespace vsocket_preload_test
