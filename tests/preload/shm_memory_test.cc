// Shared memory follows use (progs/many_clients.c): 20 connections that each
// echoed 2 MiB hold their whole rings, and give them back after a second of
// idleness; VSOCKET_STATS reports it ("shm_memory").  /proc/meminfo's Shmem
// is the whole host's, so the bounds are loose.
#include <cstdio>

#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

// The number after `prefix` in `text`, or -1.
double NumberAfter(const std::string& text, const std::string& prefix) {
  size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return std::atof(text.c_str() + at + prefix.size());
}

TEST(ShmMemory, BusyRingsShrinkBackWhenIdle) {
  PairOutcome o = RunPair(
      [](int port) {
        return std::vector<std::string>{ProgramPath("many_clients"), "server",
                                        std::to_string(port), "20"};
      },
      [](int port) {
        return std::vector<std::string>{ProgramPath("many_clients"), "client",
                                        std::to_string(port), "20", "2097152", "2500"};
      },
      Preloaded(true), Preloaded(true), Ms(60000));
  ExpectShm(o.client, 20);
  double busy = NumberAfter(o.client.out, "descriptors here, ");
  double idle = NumberAfter(o.client.out, "ms idle: ");
  EXPECT_GE(busy, 1024) << o.client.out;  // both 1 MiB rings touched
  EXPECT_LE(idle, 64) << o.client.out;
  EXPECT_NE(o.client.err.find("\"trims\":20"), std::string::npos) << o.client.err;
  EXPECT_NE(o.server.err.find("\"trims\":20"), std::string::npos) << o.server.err;
}

}  // namespace
}  // namespace vsocket_preload_test
