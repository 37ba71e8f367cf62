// sockperf: a preloaded `sockperf server --tcp`, and ping-pong and
// throughput clients either preloaded too (shared memory) or plain (the
// server falls back to kernel TCP).  Each client must report its numbers:
// ping-pong a latency and percentiles, throughput a message rate.
#include "app_test.h"

namespace vsocket_preload_test {
namespace {

struct SockperfOutcome {
  Result server, ping_pong, throughput;
};

SockperfOutcome RunSockperf(bool clients_preloaded) {
  SockperfOutcome o;
  auto server = Server::Start(
      [](int port) {
        return std::vector<std::string>{"sockperf", "server", "--tcp", "-i",
                                        "127.0.0.1", "-p", std::to_string(port)};
      },
      Preloaded(true));
  EXPECT_TRUE(server) << "sockperf server never listened";
  if (!server) return o;
  std::string port = std::to_string(server->port());
  // --mps caps the rate: at full speed over shared memory sockperf's own
  // sequence-number budget overflows (see benchmarks/apps/run.sh).
  o.ping_pong = Run({"sockperf", "ping-pong", "--tcp", "-i", "127.0.0.1", "-p",
                     port, "-m", "64", "-t", "1", "--mps", "100000"},
                    Preloaded(clients_preloaded), Ms(20000));
  o.throughput = Run({"sockperf", "throughput", "--tcp", "-i", "127.0.0.1", "-p",
                      port, "-m", "64", "-t", "1"},
                     Preloaded(clients_preloaded), Ms(20000));
  // SIGINT: sockperf server exits normally (and prints its stats).
  o.server = server->Stop(SIGINT);
  EXPECT_RUN_OK(o.ping_pong);
  EXPECT_RUN_OK(o.throughput);
  EXPECT_RUN_OK(o.server);
  return o;
}

void ExpectReports(const SockperfOutcome& o) {
  double latency = NumberAfterText(o.ping_pong.out, "Summary: Latency is");
  double p50 = NumberAfterText(o.ping_pong.out, "percentile 50.000 =");
  double received = NumberAfterText(o.ping_pong.out, "ReceivedMessages=");
  EXPECT_GT(latency, 0) << o.ping_pong.out;
  EXPECT_GT(p50, 0) << o.ping_pong.out;
  EXPECT_GT(received, 0) << o.ping_pong.out;
  double rate = NumberAfterText(o.throughput.out, "Summary: Message Rate is");
  EXPECT_GT(rate, 0) << o.throughput.out;
}

TEST(Sockperf, BothEndsPreloadedUseSharedMemory) {
  VSA_REQUIRE_PROGRAMS("sockperf");
  SockperfOutcome o = RunSockperf(true);
  ExpectReports(o);
  ExpectShmPath(o.ping_pong, 1);
  // throughput only sends (sockperf server does not reply to it).
  Stats tp = ParseStats(o.throughput.err);
  EXPECT_GE(tp.shm_connections, 1) << o.throughput.err;
  EXPECT_EQ(tp.tcp_connections, 0) << o.throughput.err;
  EXPECT_GT(tp.shm_sent, 0) << o.throughput.err;
  ExpectShmPath(o.server, 2);
}

TEST(Sockperf, OnlyServerPreloadedFallsBackToTcp) {
  VSA_REQUIRE_PROGRAMS("sockperf");
  SockperfOutcome o = RunSockperf(false);
  ExpectReports(o);
  ExpectTcpFallbackPath(o.server, 2);
  EXPECT_EQ(ParseStats(o.ping_pong.err).lines, 0) << o.ping_pong.err;
}

}  // namespace
}  // namespace vsocket_preload_test
