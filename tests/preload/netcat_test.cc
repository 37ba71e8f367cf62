// OpenBSD netcat moves a file; both ends preloaded (shared memory) or one
// end only (kernel TCP, peer_not_vsocket).  nc waits with poll() on the
// socket and its stdin, and half-closes with -N.
#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

PairOutcome Transfer(bool server_preloaded, bool client_preloaded) {
  std::string dir = TempDir();
  std::string in = dir + "/in.bin", out = dir + "/out.bin";
  WriteFile(in, PatternBytes(3 << 20, 11));
  Options so = Preloaded(server_preloaded), co = Preloaded(client_preloaded);
  so.stdout_path = out;
  co.stdin_path = in;
  PairOutcome o = RunPair(
      [](int port) {
        return std::vector<std::string>{"nc.openbsd", "-l", "127.0.0.1",
                                        std::to_string(port)};
      },
      [](int port) {
        return std::vector<std::string>{"nc.openbsd", "-N", "127.0.0.1",
                                        std::to_string(port)};
      },
      so, co);
  EXPECT_EQ(Sha256Of(out), Sha256Of(in));
  EXPECT_EQ(ReadFile(out).size(), size_t{3} << 20);
  return o;
}

TEST(Netcat, BothPreloadedUseSharedMemory) {
  PairOutcome o = Transfer(true, true);
  ExpectShm(o.server, 1);
  ExpectShm(o.client, 1);
  EXPECT_EQ(ParseStats(o.client.err).shm_sent, 3 << 20) << o.client.err;
  EXPECT_EQ(ParseStats(o.server.err).shm_received, 3 << 20) << o.server.err;
}

TEST(Netcat, OnlyClientPreloadedFallsBackToTcp) {
  PairOutcome o = Transfer(false, true);
  ExpectTcpFallback(o.client, 1);
  EXPECT_EQ(ParseStats(o.client.err).tcp_sent, 3 << 20) << o.client.err;
}

TEST(Netcat, OnlyServerPreloadedFallsBackToTcp) {
  PairOutcome o = Transfer(true, false);
  ExpectTcpFallback(o.server, 1);
  EXPECT_EQ(ParseStats(o.server.err).tcp_received, 3 << 20) << o.server.err;
}

}  // namespace
}  // namespace vsocket_preload_test
