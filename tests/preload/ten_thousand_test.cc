// Ten thousand connections open at once between two processes
// (progs/ten_thousand.c: an epoll server, one client holding them all, a
// distinct request and reply of 64 B..4 KiB on each, every byte checked
// while all are open), under two descriptor limits, each against kernel TCP:
//  - soft 1024 with a large hard limit (a service's usual limits): the
//    program raises its soft limit to what it needs and vsocket's own
//    descriptors live above it;
//  - soft = hard = 65,536 (`ulimit -n`): vsocket's descriptors share the
//    program's table, at most VSOCKET_FD_SHARE (12%) of it.
// With both ends preloaded (VSOCKET_TRANSPORT=shm) every connection works
// and the programs print what they print on kernel TCP.  Each connection
// costs vsocket one descriptor per end (docs/COMPATIBILITY.md, "descriptors
// vsocket keeps for itself"): where the limits leave room, every one is on
// shared memory; past the room, exactly those past it take kernel TCP with
// fd_limit and no other reason.  A hard limit this process cannot raise
// (no CAP_SYS_RESOURCE: a sandbox that keeps it at 20,000) is used as it
// is, and the third case then runs the most connections that fit, all on
// shared memory.  Shared memory and resident memory stay under 1 GiB and
// 512 MiB.  Set-up times against kernel TCP are printed, not asserted.
//
// ctest -L scale runs these alone.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

constexpr long kConnections = 10000;
// Descriptors vsocket keeps free for the process itself beside its
// connections' (fifo_bridge/descriptor_budget.h, kPrivateFdsForProcess).
constexpr long kProcessPrivateFds = 64;
// What the program needs beside its connections (ten_thousand.c).
constexpr long kProgramFds = 64;

struct Limits {
  long soft, hard;
};

// The hard limit a child can be given: `wanted`, or the most this process
// may raise its own to (the children inherit it).
long HardLimitUpTo(long wanted) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_max != RLIM_INFINITY && static_cast<long>(rl.rlim_max) < wanted) {
    struct rlimit raised = {rl.rlim_cur, static_cast<rlim_t>(wanted)};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return wanted;
    return static_cast<long>(rl.rlim_max);
  }
  return wanted;
}

// `argv` started by a shell under `limits`.
std::vector<std::string> UnderLimits(const Limits& limits, std::vector<std::string> argv) {
  std::vector<std::string> wrapped = {
      "sh", "-c",
      "ulimit -Sn " + std::to_string(limits.soft) + " && ulimit -Hn " +
          std::to_string(limits.hard) + " && exec \"$0\" \"$@\""};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

// Shared-memory connections the descriptor budget allows one end under
// `limits`, once the program raised its soft limit to what it needs
// (fifo_bridge/descriptor_budget.cc; 1 descriptor per named segment).
long ShmBudget(const Limits& limits, long connections) {
  long soft = std::max(limits.soft, connections + kProgramFds);
  if (limits.hard > soft) return limits.hard - soft - kProcessPrivateFds;
  return soft * 12 / 100;
}

// The number after `key` in a program's report, or -1.
long Reported(const std::string& out, const std::string& key) {
  size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::atol(out.c_str() + at + key.size());
}

// The line of `out` that starts with `key` ("" if none).
std::string LineOf(const std::string& out, const std::string& key) {
  size_t at = out.find(key);
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

PairOutcome RunScale(const Limits& limits, long connections, bool preloaded) {
  std::string n = std::to_string(connections);
  Options options = Preloaded(preloaded);
  if (preloaded) options.env["VSOCKET_TRANSPORT"] = "shm";
  PairOutcome o = RunPair(
      [&](int port) {
        return UnderLimits(limits, {ProgramPath("ten_thousand"), "server",
                                    std::to_string(port), n});
      },
      [&](int port) {
        return UnderLimits(limits, {ProgramPath("ten_thousand"), "client",
                                    std::to_string(port), n});
      },
      options, options, Ms(150000));
  if (o.client.out.find("SKIP") != std::string::npos) return o;
  EXPECT_NE(o.client.out.find("PASS"), std::string::npos) << o.client.out << o.client.err;
  EXPECT_NE(o.server.out.find("served " + n + ", " + n + " open at once"), std::string::npos)
      << o.server.out << o.server.err;
  std::printf("%s: %s\n  %s\n  %s\n", preloaded ? "vsocket shm" : "kernel TCP",
              LineOf(o.client.out, "setup:").c_str(),
              LineOf(o.client.out, "shared memory in all:").c_str(),
              LineOf(o.server.out, "server peak resident:").c_str());
  return o;
}

// Runs the pair on kernel TCP, then preloaded, and checks what is said above.
void RunAgainstKernel(const Limits& limits, long connections) {
  PairOutcome kernel = RunScale(limits, connections, false);
  if (kernel.client.out.find("SKIP") != std::string::npos) GTEST_SKIP() << kernel.client.out;
  PairOutcome shm = RunScale(limits, connections, true);

  // The same results as on kernel TCP.
  EXPECT_EQ(LineOf(shm.client.out, "exchange:"), LineOf(kernel.client.out, "exchange:"));
  EXPECT_EQ(LineOf(shm.server.out, "served"), LineOf(kernel.server.out, "served"));

  const long on_shm = std::min(connections, ShmBudget(limits, connections));
  for (const Result* end : {&shm.client, &shm.server}) {
    Stats s = ParseStats(end->err);
    EXPECT_EQ(s.lines, 1) << end->err;
    EXPECT_EQ(s.shm_connections, on_shm) << end->err;
    EXPECT_EQ(s.tcp_connections, connections - on_shm) << end->err;
  }
  // The client decides: fd_limit alone; the server sees its peer offer
  // nothing.
  Stats c = ParseStats(shm.client.err), s = ParseStats(shm.server.err);
  EXPECT_EQ(c.Reason("fd_limit"), connections - on_shm) << shm.client.err;
  EXPECT_EQ(s.Reason("peer_not_vsocket"), connections - on_shm) << shm.server.err;
  EXPECT_EQ(c.reasons.size() + s.reasons.size(),
            static_cast<size_t>(on_shm < connections ? 2 : 0))
      << shm.client.err << shm.server.err;

  EXPECT_LT(Reported(shm.client.out, "shared memory in all: "), 1024L * 1024) << shm.client.out;
  EXPECT_LT(Reported(shm.client.out, "client peak resident: "), 512L * 1024) << shm.client.out;
  EXPECT_LT(Reported(shm.server.out, "server peak resident: "), 512L * 1024) << shm.server.out;
  long kernel_ms = Reported(kernel.client.out, "setup: ");
  long shm_ms = Reported(shm.client.out, "setup: ");
  std::printf("limits soft %ld hard %ld, %ld connections: %ld on shared memory; "
              "set-up %ld ms against kernel TCP's %ld ms (x%.1f)\n",
              limits.soft, limits.hard, connections, on_shm, shm_ms, kernel_ms,
              static_cast<double>(shm_ms) / static_cast<double>(std::max(kernel_ms, 1L)));
}

// The usual service limits: soft 1024, hard large (systemd's 524,288).
TEST(TenThousand, SoftLimit1024WithALargeHardLimit) {
  RunAgainstKernel({1024, HardLimitUpTo(524288)}, kConnections);
}

// `ulimit -n 65536`.
TEST(TenThousand, SoftEqualToHard65536) {
  long both = HardLimitUpTo(65536);
  RunAgainstKernel({both, both}, kConnections);
}

// Soft 1024 and the hard limit as it is: the most connections (up to ten
// thousand) whose private descriptors fit above the raised soft limit, all
// on shared memory.
TEST(TenThousand, AsManyAsTheHardLimitHoldsAllOnSharedMemory) {
  Limits limits{1024, HardLimitUpTo(524288)};
  long fit = (limits.hard - kProgramFds - kProcessPrivateFds) / 2;
  if (fit >= kConnections) GTEST_SKIP() << "the first case has them all on shared memory";
  ASSERT_GE(ShmBudget(limits, fit), fit);
  RunAgainstKernel(limits, fit);
}

}  // namespace
}  // namespace vsocket_preload_test
