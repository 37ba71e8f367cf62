// Connections too short to repay a fast path's setup stay on kernel TCP
// (vsocket/connection_history.h): python3's http.server and http.client,
// both ends preloaded, against the same pair on kernel TCP.  Every
// response is checked by the client.
#include <gtest/gtest.h>

#include <csignal>

#include "port_line_server.h"
#include "preload_harness.h"

namespace vsocket_preload_test {
namespace {

struct Outcome {
  Result client;
  Stats client_stats;
};

// Runs the client's `specs` against a fresh server; both preloaded or not.
Outcome RunClient(bool preload, const std::vector<std::string>& specs,
                  const std::map<std::string, std::string>& env = {}) {
  std::string script = std::string(VSP_SCRIPT_DIR) + "/short_http.py";
  Options so, co;
  so.preload = co.preload = preload;
  so.env = co.env = env;
  Outcome o;
  ServedRun run = RunAgainstServer(
      {Python3(), script, "server"}, so,
      [&](const std::string& port) {
        std::vector<std::string> argv = {Python3(), script, "client", port};
        argv.insert(argv.end(), specs.begin(), specs.end());
        return argv;
      },
      co, Ms(40000), SIGTERM);
  if (!run.ran) return o;
  o.client = run.client;
  EXPECT_TRUE(o.client.exit.Ok()) << o.client.exit.ToString() << o.client.err;
  o.client_stats = ParseStats(o.client.err);
  return o;
}

void ExpectAnswered(const Outcome& o, int requests) {
  EXPECT_NE(o.client.out.find("ok " + std::to_string(requests)), std::string::npos)
      << o.client.out << o.client.err;
}

TEST(ShortConnections, KernelTcpReference) {
  Outcome o = RunClient(false, {"short:30", "keep:20"});
  ExpectAnswered(o, 50);
}

// The first kShortStreak (8) one-request connections take shared memory;
// the rest go straight to TCP.
TEST(ShortConnections, AfterAFewShortOnesTheRestTakeTcp) {
  Outcome o = RunClient(true, {"short:30"});
  ExpectAnswered(o, 30);
  const Stats& s = o.client_stats;
  EXPECT_EQ(s.shm_connections, 8) << o.client.err;
  EXPECT_EQ(s.tcp_connections, 22) << o.client.err;
  EXPECT_EQ(s.Reason("short_lived"), 22) << o.client.err;
}

TEST(ShortConnections, BusyConnectionsStayOnSharedMemory) {
  Outcome o = RunClient(true, {"keep:20", "keep:20", "keep:20", "keep:20", "keep:20"});
  ExpectAnswered(o, 100);
  EXPECT_EQ(o.client_stats.shm_connections, 5) << o.client.err;
  EXPECT_EQ(o.client_stats.tcp_connections, 0) << o.client.err;
}

// A busy connection on TCP ends the prediction: the next one is offered
// shared memory again.
TEST(ShortConnections, ABusyConnectionEndsThePrediction) {
  Outcome o = RunClient(true, {"short:10", "keep:20", "short:1"});
  ExpectAnswered(o, 31);
  const Stats& s = o.client_stats;
  EXPECT_EQ(s.shm_connections, 9) << o.client.err;   // 8 short, then the last
  EXPECT_EQ(s.Reason("short_lived"), 3) << o.client.err;  // 2 short, the busy one
}

TEST(ShortConnections, ZeroTurnsThePredictionOff) {
  Outcome o = RunClient(true, {"short:12"}, {{"VSOCKET_SHORT_CALLS", "0"}});
  ExpectAnswered(o, 12);
  EXPECT_EQ(o.client_stats.shm_connections, 12) << o.client.err;
}

TEST(ShortConnections, ANamedTransportIsObeyed) {
  Outcome o = RunClient(true, {"short:12"}, {{"VSOCKET_TRANSPORT", "shm"}});
  ExpectAnswered(o, 12);
  EXPECT_EQ(o.client_stats.shm_connections, 12) << o.client.err;
}

}  // namespace
}  // namespace vsocket_preload_test
