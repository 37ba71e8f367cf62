// python3's socket module, both ends preloaded (shared memory) and one end
// only (kernel TCP, peer_not_vsocket).
#include <gtest/gtest.h>

#include "port_line_server.h"
#include "preload_harness.h"

namespace vsocket_preload_test {
namespace {

constexpr int64_t kEchoBytes = 2 * 1024 * 1024 + 416500;  // see echo.py

using Outcome = ServedRun;  // .server, .client

Outcome RunEcho(bool server_preloaded, bool client_preloaded) {
  std::string script = std::string(VSP_SCRIPT_DIR) + "/echo.py";
  Options so, co;
  so.preload = server_preloaded;
  co.preload = client_preloaded;
  Outcome o = RunAgainstServer(
      {Python3(), script, "server"}, so,
      [&](const std::string& port) {
        return std::vector<std::string>{Python3(), script, "client", port};
      },
      co);
  if (!o.ran) return o;
  EXPECT_TRUE(o.client.exit.Ok()) << o.client.exit.ToString() << o.client.err;
  EXPECT_TRUE(o.server.exit.Ok()) << o.server.exit.ToString() << o.server.err;
  EXPECT_NE(o.client.out.find("ok " + std::to_string(kEchoBytes)), std::string::npos)
      << o.client.out << o.client.err;
  EXPECT_NE(o.server.out.find("served " + std::to_string(kEchoBytes)),
            std::string::npos) << o.server.out << o.server.err;
  return o;
}

TEST(PythonEcho, BothPreloadedUseSharedMemory) {
  Outcome o = RunEcho(true, true);
  for (const Result* r : {&o.server, &o.client}) {
    Stats s = ParseStats(r->err);
    EXPECT_EQ(s.shm_connections, 1) << r->err;
    EXPECT_EQ(s.tcp_connections, 0) << r->err;
    EXPECT_EQ(s.shm_sent, kEchoBytes) << r->err;
    EXPECT_EQ(s.shm_received, kEchoBytes) << r->err;
  }
}

TEST(PythonEcho, OnlyClientPreloadedFallsBackToTcp) {
  Outcome o = RunEcho(false, true);
  Stats s = ParseStats(o.client.err);
  EXPECT_EQ(s.tcp_connections, 1) << o.client.err;
  EXPECT_EQ(s.shm_connections, 0) << o.client.err;
  EXPECT_EQ(s.Reason("peer_not_vsocket"), 1) << o.client.err;
  EXPECT_EQ(s.tcp_sent, kEchoBytes) << o.client.err;
  EXPECT_EQ(ParseStats(o.server.err).lines, 0);
}

TEST(PythonEcho, OnlyServerPreloadedFallsBackToTcp) {
  Outcome o = RunEcho(true, false);
  Stats s = ParseStats(o.server.err);
  EXPECT_EQ(s.tcp_connections, 1) << o.server.err;
  EXPECT_EQ(s.shm_connections, 0) << o.server.err;
  EXPECT_EQ(s.Reason("peer_not_vsocket"), 1) << o.server.err;
  EXPECT_EQ(s.tcp_received, kEchoBytes) << o.server.err;
}

}  // namespace
}  // namespace vsocket_preload_test
