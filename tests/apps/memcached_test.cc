// memcached: a preloaded memcached (TCP only, -U 0) and a small python3
// client (scripts/memcached_client.py) speaking the text protocol over a
// plain socket: 100 keys with random values set and read back equal.  The
// client is preloaded too (shared memory) or plain (memcached falls back to
// kernel TCP).  memcached exits normally on SIGTERM and prints its stats.
#include "app_test.h"

namespace vsocket_preload_test {
namespace {

struct MemcachedOutcome {
  Result server, client;
};

MemcachedOutcome RunMemcached(bool client_preloaded) {
  MemcachedOutcome o;
  auto server = Server::Start(
      [](int port) {
        std::vector<std::string> argv = {"memcached", "-l", "127.0.0.1", "-p",
                                         std::to_string(port), "-U", "0"};
        if (geteuid() == 0) {  // memcached refuses to run as root without -u
          argv.push_back("-u");
          argv.push_back("root");
        }
        return argv;
      },
      Preloaded(true));
  EXPECT_TRUE(server) << "memcached never listened";
  if (!server) return o;
  o.client = Run({"/usr/bin/python3", VSA_SCRIPT_DIR "/memcached_client.py",
                  std::to_string(server->port()), "100"},
                 Preloaded(client_preloaded), Ms(30000));
  o.server = server->Stop(SIGTERM);
  EXPECT_RUN_OK(o.client);
  EXPECT_RUN_OK(o.server);
  EXPECT_NE(o.client.out.find("PASS 100"), std::string::npos) << Describe(o.client);
  return o;
}

TEST(Memcached, BothEndsPreloadedUseSharedMemory) {
  VSA_REQUIRE_PROGRAMS("memcached", "/usr/bin/python3");
  MemcachedOutcome o = RunMemcached(true);
  ExpectShmPath(o.client, 1);
  ExpectShmPath(o.server, 1);
}

TEST(Memcached, OnlyServerPreloadedFallsBackToTcp) {
  VSA_REQUIRE_PROGRAMS("memcached", "/usr/bin/python3");
  MemcachedOutcome o = RunMemcached(false);
  ExpectTcpFallbackPath(o.server, 1);
  EXPECT_EQ(ParseStats(o.client.err).lines, 0) << o.client.err;
}

}  // namespace
}  // namespace vsocket_preload_test
