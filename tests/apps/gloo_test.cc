// torch.distributed over gloo: two /usr/bin/python3 ranks
// (scripts/gloo_allreduce_check.py, init_method tcp://127.0.0.1:PORT)
// all_reduce a 4 MiB tensor of rank+1 and each checks every element is 3.0.
// Both ranks preloaded (the store and the gloo pair on shared memory), or
// only rank 1 (every connection of rank 1 goes to the plain rank 0, so all
// fall back to kernel TCP; a preloaded rank 0 alone would also connect to
// its own store, over shared memory).
#include "app_test.h"

namespace vsocket_preload_test {
namespace {

bool HaveTorch() {
  Options o;
  o.preload = false;
  Result r = Run({"/usr/bin/python3", "-c", "import torch.distributed as d; "
                  "print(d.is_available() and d.is_gloo_available())"},
                 o, Ms(30000));
  return r.exit.Ok() && r.out.find("True") != std::string::npos;
}

struct GlooOutcome {
  Result rank0, rank1;
};

GlooOutcome RunGloo(bool rank0_preloaded, bool rank1_preloaded) {
  GlooOutcome o;
  std::string port = std::to_string(PickFreePort());
  std::string script = VSA_SCRIPT_DIR "/gloo_allreduce_check.py";
  auto rank0 = Process::Start({"/usr/bin/python3", script, "0", port},
                              Preloaded(rank0_preloaded));
  auto rank1 = Process::Start({"/usr/bin/python3", script, "1", port},
                              Preloaded(rank1_preloaded));
  EXPECT_TRUE(rank0 && rank1);
  if (!rank0 || !rank1) return o;
  for (auto [p, r] : {std::pair{rank0.get(), &o.rank0}, std::pair{rank1.get(), &o.rank1}}) {
    r->exit = p->Wait(Ms(45000));
    r->out = p->Stdout();
    r->err = p->Stderr();
  }
  EXPECT_RUN_OK(o.rank0);
  EXPECT_RUN_OK(o.rank1);
  EXPECT_NE(o.rank0.out.find("PASS rank=0 elements=1048576"), std::string::npos)
      << Describe(o.rank0);
  EXPECT_NE(o.rank1.out.find("PASS rank=1 elements=1048576"), std::string::npos)
      << Describe(o.rank1);
  return o;
}

TEST(Gloo, BothRanksPreloadedUseSharedMemory) {
  VSA_REQUIRE_PROGRAMS("/usr/bin/python3");
  if (!HaveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch with gloo";
  GlooOutcome o = RunGloo(true, true);
  ExpectShmPath(o.rank0, 1);
  ExpectShmPath(o.rank1, 1);
  // The 4 MiB tensor crossed between the ranks.
  EXPECT_GT(ParseStats(o.rank0.err).shm_received, int64_t{2} << 20) << o.rank0.err;
}

TEST(Gloo, OnlyOneRankPreloadedFallsBackToTcp) {
  VSA_REQUIRE_PROGRAMS("/usr/bin/python3");
  if (!HaveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch with gloo";
  GlooOutcome o = RunGloo(false, true);
  ExpectTcpFallbackPath(o.rank1, 1);
  EXPECT_GT(ParseStats(o.rank1.err).tcp_received, int64_t{2} << 20) << o.rank1.err;
  EXPECT_EQ(ParseStats(o.rank0.err).lines, 0) << o.rank0.err;
}

}  // namespace
}  // namespace vsocket_preload_test
