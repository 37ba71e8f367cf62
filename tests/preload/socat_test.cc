// socat moves a file, checked with sha256sum; both ends preloaded (shared
// memory) or one end only (kernel TCP, peer_not_vsocket).
#include "real_programs.h"

#include <chrono>

namespace vsocket_preload_test {
namespace {

constexpr size_t kBytes = size_t{6} << 20;

PairOutcome Transfer(bool server_preloaded, bool client_preloaded) {
  std::string dir = TempDir();
  std::string in = dir + "/in.bin", out = dir + "/out.bin";
  WriteFile(in, PatternBytes(kBytes, 5));
  PairOutcome o = RunPair(
      [out](int port) {
        return std::vector<std::string>{
            "socat", "-u",
            "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1,reuseaddr",
            "OPEN:" + out + ",creat,trunc"};
      },
      [in](int port) {
        return std::vector<std::string>{
            "socat", "-u", "OPEN:" + in, "TCP:127.0.0.1:" + std::to_string(port)};
      },
      Preloaded(server_preloaded), Preloaded(client_preloaded));
  EXPECT_EQ(Sha256Of(out), Sha256Of(in));
  return o;
}

TEST(Socat, BothPreloadedUseSharedMemory) {
  PairOutcome o = Transfer(true, true);
  ExpectShm(o.server, 1);
  ExpectShm(o.client, 1);
  EXPECT_EQ(ParseStats(o.client.err).shm_sent, int64_t(kBytes)) << o.client.err;
  EXPECT_EQ(ParseStats(o.server.err).shm_received, int64_t(kBytes)) << o.server.err;
}

TEST(Socat, OnlyClientPreloadedFallsBackToTcp) {
  PairOutcome o = Transfer(false, true);
  ExpectTcpFallback(o.client, 1);
}

TEST(Socat, OnlyServerPreloadedFallsBackToTcp) {
  PairOutcome o = Transfer(true, false);
  ExpectTcpFallback(o.server, 1);
}

// socat's fork option: the listener forks a child per connection and closes
// its copy; EXEC: makes the child fork again and exec `cat`.  The client
// must get its data back and then end of stream at once (not after -t).
TEST(Socat, ForkingServerWithExecEchoes) {
  std::string dir = TempDir();
  std::string in = dir + "/in.bin", out = dir + "/out.bin";
  WriteFile(in, PatternBytes(1 << 20, 9));
  Options co = Preloaded(true);
  co.stdin_path = in;
  co.stdout_path = out;
  auto start = std::chrono::steady_clock::now();
  PairOutcome o;
  for (int attempt = 0; attempt < 3 && !o.started; ++attempt) {
    int port = PickFreePort();
    auto server = Process::Start(
        {"socat", "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1,reuseaddr,fork",
         "EXEC:cat"},
        Preloaded(true));
    if (!server || !WaitForListener(port, Ms(10000))) continue;
    o.started = true;
    start = std::chrono::steady_clock::now();
    o.client = vsocket_preload_test::Run({"socat", "-t", "20", "-", "TCP:127.0.0.1:" + std::to_string(port)},
                   co, Ms(40000));
    // The server forks per connection and never exits by itself.
  }
  ASSERT_TRUE(o.started);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(o.client.exit.Ok()) << o.client.exit.ToString() << o.client.err;
  EXPECT_EQ(Sha256Of(out), Sha256Of(in));
  EXPECT_LT(took, std::chrono::seconds(10)) << "end of stream came late";
  ExpectShm(o.client, 1);
}

}  // namespace
}  // namespace vsocket_preload_test
