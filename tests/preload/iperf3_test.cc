// iperf3, both directions (-R), both ends preloaded (shared memory: the
// control and the data connection) or one end only (kernel TCP).  iperf3
// uses select(), non-blocking sockets, TCP_NODELAY and TCP_INFO.
#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

PairOutcome RunIperf(bool reverse, bool server_preloaded, bool client_preloaded) {
  return RunPair(
      [](int port) {
        return std::vector<std::string>{"iperf3", "-s", "-1", "-B", "127.0.0.1",
                                        "-p", std::to_string(port)};
      },
      [reverse](int port) {
        std::vector<std::string> argv = {"iperf3", "-c", "127.0.0.1", "-p",
                                         std::to_string(port), "-t", "1"};
        if (reverse) argv.push_back("-R");
        return argv;
      },
      Preloaded(server_preloaded), Preloaded(client_preloaded));
}

void ExpectMoved(const PairOutcome& o, bool reverse) {
  EXPECT_NE(o.client.out.find("iperf Done"), std::string::npos) << o.client.out;
  const Result& sender = reverse ? o.server : o.client;
  const Result& receiver = reverse ? o.client : o.server;
  EXPECT_GT(ParseStats(sender.err).shm_sent, int64_t{10} << 20) << sender.err;
  EXPECT_GT(ParseStats(receiver.err).shm_received, int64_t{10} << 20) << receiver.err;
}

TEST(Iperf3, ClientToServerOnSharedMemory) {
  PairOutcome o = RunIperf(false, true, true);
  ExpectShm(o.server, 2);
  ExpectShm(o.client, 2);
  ExpectMoved(o, false);
}

TEST(Iperf3, ServerToClientOnSharedMemory) {
  PairOutcome o = RunIperf(true, true, true);
  ExpectShm(o.server, 2);
  ExpectShm(o.client, 2);
  ExpectMoved(o, true);
}

TEST(Iperf3, OnlyClientPreloadedFallsBackToTcp) {
  PairOutcome o = RunIperf(false, false, true);
  ExpectTcpFallback(o.client, 2);
  EXPECT_GT(ParseStats(o.client.err).tcp_sent, int64_t{10} << 20) << o.client.err;
}

TEST(Iperf3, OnlyServerPreloadedFallsBackToTcpReverse) {
  PairOutcome o = RunIperf(true, true, false);
  ExpectTcpFallback(o.server, 2);
  EXPECT_GT(ParseStats(o.server.err).tcp_sent, int64_t{10} << 20) << o.server.err;
}

}  // namespace
}  // namespace vsocket_preload_test
