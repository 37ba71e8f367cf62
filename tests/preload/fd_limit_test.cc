// A server with 200 concurrent clients under `ulimit -n 256`
// (progs/many_clients.c): it works on kernel TCP, so it must work with
// either end or both preloaded.  A shell's `ulimit -n` sets the soft and the
// hard limit: vsocket's own descriptors then come out of the program's
// table and are capped (VSOCKET_FD_SHARE), and connections past the cap take
// kernel TCP (fd_limit).  With only the soft limit lowered (`ulimit -Sn`)
// they live above it and every connection gets shared memory.
#include <sys/resource.h>

#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

constexpr int kClients = 200;

std::vector<std::string> UnderLimit(const std::string& ulimit_option,
                                    std::vector<std::string> argv) {
  std::vector<std::string> wrapped = {
      "sh", "-c", "ulimit " + ulimit_option + " 256 && exec \"$0\" \"$@\""};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

PairOutcome RunManyClients(const std::string& ulimit_option, bool server_preloaded,
                           bool client_preloaded) {
  std::string n = std::to_string(kClients);
  PairOutcome o = RunPair(
      [&](int port) {
        return UnderLimit(ulimit_option, {ProgramPath("many_clients"), "server",
                                          std::to_string(port), n});
      },
      [&](int port) {
        return UnderLimit(ulimit_option, {ProgramPath("many_clients"), "client",
                                          std::to_string(port), n});
      },
      Preloaded(server_preloaded), Preloaded(client_preloaded), Ms(60000));
  EXPECT_NE(o.client.out.find("PASS"), std::string::npos) << o.client.err;
  EXPECT_NE(o.server.out.find("served 200"), std::string::npos) << o.server.err;
  return o;
}

TEST(FdLimit, KernelTcpReference) { RunManyClients("-n", false, false); }

TEST(FdLimit, ClientPreloaded) {
  PairOutcome o = RunManyClients("-n", false, true);
  ExpectTcpFallback(o.client, kClients);
}

TEST(FdLimit, ServerPreloaded) { RunManyClients("-n", true, false); }

// Soft and hard limit 256: shared memory up to the cap, TCP after it.
TEST(FdLimit, BothPreloadedCapTheirOwnDescriptors) {
  PairOutcome o = RunManyClients("-n", true, true);
  Stats c = ParseStats(o.client.err);
  EXPECT_EQ(c.shm_connections + c.tcp_connections, kClients) << o.client.err;
  EXPECT_GE(c.shm_connections, 1) << o.client.err;
  EXPECT_EQ(c.Reason("fd_limit"), c.tcp_connections) << o.client.err;
  // 12% of 256 descriptors, 1 per connection (the liveness TCP socket: the
  // segment is held by its name).
  EXPECT_LE(c.shm_connections, 256 * 12 / 100 / 1) << o.client.err;
}

// VSOCKET_MAX_SHM_CONNECTIONS caps shared memory per process.
TEST(ConnectionLimit, ConnectionsPastTheCapTakeTcp) {
  Options server = Preloaded(true), client = Preloaded(true);
  client.env["VSOCKET_MAX_SHM_CONNECTIONS"] = "5";
  PairOutcome o = RunPair(
      [](int port) {
        return std::vector<std::string>{ProgramPath("many_clients"), "server",
                                        std::to_string(port), "20"};
      },
      [](int port) {
        return std::vector<std::string>{ProgramPath("many_clients"), "client",
                                        std::to_string(port), "20"};
      },
      server, client);
  Stats c = ParseStats(o.client.err);
  EXPECT_EQ(c.shm_connections, 5) << o.client.err;
  EXPECT_EQ(c.tcp_connections, 15) << o.client.err;
  EXPECT_EQ(c.Reason("connection_limit"), 15) << o.client.err;
}

// Only the soft limit lowered: vsocket's descriptors live above it.
TEST(FdLimit, BothPreloadedAboveTheSoftLimit) {
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4096)
    GTEST_SKIP() << "the hard limit leaves no room above 256";
  PairOutcome o = RunManyClients("-Sn", true, true);
  ExpectShm(o.client, kClients);
  ExpectShm(o.server, kClients);
}

}  // namespace
}  // namespace vsocket_preload_test
