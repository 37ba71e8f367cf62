// Ten thousand concurrent connections between two processes
// (progs/ten_thousand.c: an epoll server, one client holding them all, every
// echo checked while all are open).  Kernel TCP is the reference.  With both
// ends preloaded every connection works; each is on shared memory unless
// the hard descriptor limit leaves no room for vsocket's own descriptors
// (then TCP, fd_limit: a sandbox without CAP_SYS_RESOURCE keeps the hard
// limit at what it was); all of them together cost under 1 GiB of shared
// memory.
#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

constexpr int kConnections = 10000;

PairOutcome RunTenThousand(bool preloaded) {
  std::string n = std::to_string(kConnections);
  PairOutcome o = RunPair(
      [&](int port) {
        return std::vector<std::string>{ProgramPath("ten_thousand"), "server",
                                        std::to_string(port), n};
      },
      [&](int port) {
        return std::vector<std::string>{ProgramPath("ten_thousand"), "client",
                                        std::to_string(port), n};
      },
      Preloaded(preloaded), Preloaded(preloaded), Ms(150000));
  if (o.client.out.find("SKIP") != std::string::npos) return o;
  EXPECT_TRUE(o.client.exit.Ok()) << o.client.err;
  EXPECT_NE(o.client.out.find("PASS"), std::string::npos) << o.client.out << o.client.err;
  EXPECT_NE(o.server.out.find("served " + n), std::string::npos) << o.server.out
                                                                << o.server.err;
  std::printf("%s", o.client.out.c_str());
  return o;
}

// The number after `key` in a program's report, or -1.
long Reported(const std::string& out, const std::string& key) {
  size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::atol(out.c_str() + at + key.size());
}

TEST(TenThousand, KernelTcpReference) {
  PairOutcome o = RunTenThousand(false);
  if (o.client.out.find("SKIP") != std::string::npos) GTEST_SKIP() << o.client.out;
}

TEST(TenThousand, BothPreloadedEveryConnectionWorksUnderOneGiB) {
  PairOutcome o = RunTenThousand(true);
  if (o.client.out.find("SKIP") != std::string::npos) GTEST_SKIP() << o.client.out;
  Stats c = ParseStats(o.client.err);
  Stats s = ParseStats(o.server.err);
  // vsocket needs about 5 descriptors per shared-memory connection
  // (docs/COMPATIBILITY.md, "Descriptor budget").
  const bool room = Reported(o.client.out, "hard limit ") >= 7L * kConnections + 1024 &&
                    Reported(o.server.out, "hard limit ") >= 7L * kConnections + 1024;
  if (room) {
    EXPECT_EQ(c.shm_connections, kConnections) << o.client.err;
    EXPECT_EQ(s.shm_connections, kConnections) << o.server.err;
  } else {
    EXPECT_GE(c.shm_connections, 1000) << o.client.err;
    EXPECT_EQ(c.shm_connections + c.tcp_connections, kConnections) << o.client.err;
    // Past the budget: fd_limit.  A client port is picked at random (32
    // tries, docs/PROTOCOL.md, client step 4); with ten thousand of them
    // bound, a rare connection finds none free (local_ports_busy; seen
    // once, in CI's sanitizer run): it works on TCP as well.
    EXPECT_EQ(c.tcp_connections, c.Reason("fd_limit") + c.Reason("local_ports_busy"))
        << o.client.err;
    EXPECT_LE(c.Reason("local_ports_busy"), 8) << o.client.err;
  }
  std::printf("client: %lld on shm, %lld on tcp (fd_limit %lld)\n",
              static_cast<long long>(c.shm_connections),
              static_cast<long long>(c.tcp_connections),
              static_cast<long long>(c.Reason("fd_limit")));
  long kib = Reported(o.client.out, "shared memory in all: ");
  EXPECT_GE(kib, 0) << o.client.out;
  EXPECT_LT(kib, 1024L * 1024) << o.client.out;
}

}  // namespace
}  // namespace vsocket_preload_test
