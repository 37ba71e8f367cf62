// Shared memory with a peer of another user (VSOCKET_SHARE_UIDS,
// fifo_bridge/sharing_policy.h): the python3 echo pair with the server run
// as nobody and the client as root.  Memory is shared only when each end
// lists the other's user; otherwise the connection takes kernel TCP with
// uid_mismatch on both ends (the client offers a sealed segment, and the
// accepting process's decline says why), and the bytes arrive either way.
#include <unistd.h>

#include <gtest/gtest.h>

#include "port_line_server.h"
#include "preload_harness.h"

namespace vsocket_preload_test {
namespace {

constexpr int64_t kEchoBytes = 2 * 1024 * 1024 + 416500;  // see echo.py

using Outcome = ServedRun;  // .server, .client

// "" leaves VSOCKET_SHARE_UIDS unset on that end.
Outcome RunAcrossUsers(const std::string& server_shares,
                       const std::string& client_shares) {
  std::string script = std::string(VSP_SCRIPT_DIR) + "/echo.py";
  Options so, co;
  if (!server_shares.empty()) so.env["VSOCKET_SHARE_UIDS"] = server_shares;
  if (!client_shares.empty()) co.env["VSOCKET_SHARE_UIDS"] = client_shares;
  Outcome o = RunAgainstServer(
      {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", Python3(),
       script, "server"},
      so,
      [&](const std::string& port) {
        return std::vector<std::string>{Python3(), script, "client", port};
      },
      co);
  if (!o.ran) return o;
  EXPECT_TRUE(o.client.exit.Ok()) << o.client.exit.ToString() << o.client.err;
  EXPECT_TRUE(o.server.exit.Ok()) << o.server.exit.ToString() << o.server.err;
  EXPECT_NE(o.client.out.find("ok " + std::to_string(kEchoBytes)), std::string::npos)
      << o.client.out << o.client.err;
  return o;
}

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (runs the server as nobody)"

TEST(CrossUser, BothEndsListingTheOtherShareMemory) {
  REQUIRE_ROOT();
  Outcome o = RunAcrossUsers("root", "nobody");
  for (const Result* r : {&o.server, &o.client}) {
    Stats s = ParseStats(r->err);
    EXPECT_EQ(s.shm_connections, 1) << r->err;
    EXPECT_EQ(s.tcp_connections, 0) << r->err;
    EXPECT_EQ(s.shm_received, kEchoBytes) << r->err;
  }
}

TEST(CrossUser, NothingIsSharedByDefault) {
  REQUIRE_ROOT();
  Outcome o = RunAcrossUsers("", "");
  Stats c = ParseStats(o.client.err);
  EXPECT_EQ(c.shm_connections, 0) << o.client.err;
  EXPECT_EQ(c.Reason("uid_mismatch"), 1) << o.client.err;
  EXPECT_EQ(ParseStats(o.server.err).Reason("uid_mismatch"), 1) << o.server.err;
  EXPECT_EQ(c.tcp_sent, kEchoBytes) << o.client.err;
  // The exit statistics say how to share.
  EXPECT_NE(o.client.err.find("VSOCKET_SHARE_UIDS=<user>"), std::string::npos)
      << o.client.err;
}

TEST(CrossUser, AServerThatDoesNotListTheClientDeclinesAtOnce) {
  REQUIRE_ROOT();
  Outcome o = RunAcrossUsers("", "nobody");
  Stats c = ParseStats(o.client.err), s = ParseStats(o.server.err);
  EXPECT_EQ(c.shm_connections, 0) << o.client.err;
  EXPECT_EQ(c.Reason("uid_mismatch"), 1) << o.client.err;
  EXPECT_EQ(s.Reason("uid_mismatch"), 1) << o.server.err;
  // Bytes written into the offered ring before the decline were replayed
  // over TCP; the stats count them where they were first written.
  EXPECT_EQ(c.tcp_sent + c.shm_sent, kEchoBytes) << o.client.err;
}

TEST(CrossUser, AClientThatDoesNotListTheServerStaysOnTcp) {
  REQUIRE_ROOT();
  Outcome o = RunAcrossUsers("root", "daemon");  // another user, not nobody
  Stats c = ParseStats(o.client.err);
  EXPECT_EQ(c.shm_connections, 0) << o.client.err;
  EXPECT_EQ(c.Reason("uid_mismatch"), 1) << o.client.err;
  EXPECT_EQ(ParseStats(o.server.err).shm_connections, 0) << o.server.err;
}

TEST(CrossUser, AMalformedEntryIsNamedOnceAndTheRestApplies) {
  REQUIRE_ROOT();
  Outcome o = RunAcrossUsers("root,no-such-user-here", "nobody");
  EXPECT_NE(o.server.err.find("'no-such-user-here' is neither a uid nor a user"),
            std::string::npos) << o.server.err;
  EXPECT_EQ(ParseStats(o.server.err).shm_connections, 1) << o.server.err;
}

}  // namespace
}  // namespace vsocket_preload_test
