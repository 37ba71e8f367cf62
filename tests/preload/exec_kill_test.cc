// Kill at exec hand-over (progs/exec_chain.c): a preloaded client streams
// 4 MiB to a preloaded server and re-execs itself every 64 KiB, handing its
// shared-memory connection to each new image; it is SIGKILLed at a random
// moment -- often inside an exec, between the old image's export and the
// new image's adoption.  The server (the survivor) must see EOF or
// ECONNRESET within 1 s of the kill, have received a byte-exact prefix of
// the stream (it checks every byte itself), and no segment file of the
// client may be left once a new process made an offer.
//
// VSOCKET_EXEC_KILL_ITERATIONS (default 30) by hand.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <set>
#include <thread>

#include "fifo_bridge/shm_segment.h"
#include "preload_harness.h"
#include "tests/support/segment_owner.h"

namespace vsocket_preload_test {
namespace {

constexpr uint64_t kTotal = 4 << 20;
constexpr uint64_t kStep = 64 << 10;

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// Segment files in the user's directory made by one of `pids`.
int SegmentsOf(const std::set<pid_t>& pids) {
  const std::string dir = "/dev/shm/vsocket-" + std::to_string(geteuid());
  int found = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = open((dir + "/" + e->d_name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    vsocket::fifo::SegmentHeader h{};
    if (pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
        pids.count(static_cast<pid_t>(h.client_pid)) &&
        vsocket_test::MadeInThisPidNamespace(h)) {
      ++found;
    }
    close(fd);
  }
  closedir(d);
  return found;
}

struct Round {
  bool killed = false;
  uint64_t got = 0;
  std::string end;
  int64_t detect_ms = 0;
  int64_t life_ms = 0;
};

// One sink + source; kill the source after `kill_after_ms` (< 0: never).
Round RunRound(int64_t kill_after_ms, std::set<pid_t>* pids) {
  Round r;
  Options opts;
  opts.env["VSOCKET_LOG"] = "error";
  auto sink = Process::Start({ProgramPath("exec_chain"), "sink"}, opts);
  std::string port_line = sink->WaitForLine(Ms(10000));
  int port = 0;
  EXPECT_EQ(sscanf(port_line.c_str(), "port %d", &port), 1) << sink->Stderr();
  if (port == 0) return r;
  const int64_t born = NowMs();
  auto source = Process::Start({ProgramPath("exec_chain"), "source", std::to_string(port),
                                std::to_string(kTotal), std::to_string(kStep)},
                               opts);
  pids->insert(source->pid());
  int64_t kill_ms = 0;
  if (kill_after_ms >= 0) {
    std::this_thread::sleep_for(Ms(kill_after_ms));
    if (source->Running()) {
      kill(source->pid(), SIGKILL);
      kill_ms = NowMs();
    }
  }
  Exit se = source->Wait(Ms(20000));
  r.life_ms = NowMs() - born;
  r.killed = !se.exited && se.signal == SIGKILL;
  if (!r.killed) {
    EXPECT_TRUE(se.Ok()) << se.ToString() << source->Stderr();
  }
  Exit ke = sink->Wait(Ms(10000));
  if (kill_after_ms < 0) {
    // Unkilled: shared memory end to end, across all 63 execs of the source.
    EXPECT_EQ(ParseStats(sink->Stderr()).shm_connections, 1) << sink->Stderr();
    EXPECT_EQ(ParseStats(source->Stderr()).shm_connections, 1) << source->Stderr();
  }
  EXPECT_TRUE(ke.Ok()) << ke.ToString() << "\n" << sink->Stdout() << sink->Stderr();
  char end[16] = "";
  unsigned long long got = 0;
  long long end_ms = 0;
  const std::string out = sink->Stdout();
  const size_t at = out.find("got ");
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return r;
  EXPECT_EQ(sscanf(out.c_str() + at, "got %llu end=%15s ms=%lld", &got, end, &end_ms), 3);
  r.got = got;
  r.end = end;
  if (r.killed && r.end != "none") r.detect_ms = end_ms - kill_ms;
  if (!r.killed) {
    EXPECT_EQ(r.got, kTotal);
    EXPECT_EQ(r.end, "eof");
  } else {
    EXPECT_TRUE(r.end == "eof" || r.end == "reset" || r.end == "none") << r.end;
    EXPECT_LT(r.detect_ms, 1000) << "the server noticed the death after " << r.detect_ms << " ms";
  }
  return r;
}

TEST(ExecKill, KilledAroundItsExecsTheServerSeesEofOrResetPromptly) {
  const char* env = getenv("VSOCKET_EXEC_KILL_ITERATIONS");
  const int iterations = env && *env ? atoi(env) : 30;
  std::set<pid_t> pids;
  const Round calm = RunRound(-1, &pids);  // its life, unkilled
  ASSERT_FALSE(HasFailure());
  std::mt19937_64 rng(static_cast<uint64_t>(time(nullptr)));
  int killed = 0, resets = 0;
  int64_t slowest = 0;
  for (int i = 0; i < iterations && !HasFailure(); ++i) {
    const int64_t after = static_cast<int64_t>(rng() % static_cast<uint64_t>(calm.life_ms + 1));
    SCOPED_TRACE("kill after " + std::to_string(after) + " ms");
    Round r = RunRound(after, &pids);
    killed += r.killed;
    resets += r.end == "reset";
    slowest = std::max(slowest, r.detect_ms);
  }
  std::printf("exec kill: %d rounds, %d killed (%lld ms life unkilled), %d resets, "
              "slowest detection %lld ms\n",
              iterations, killed, static_cast<long long>(calm.life_ms), resets,
              static_cast<long long>(slowest));
  // A new preloaded pair: its offer sweeps whatever a killed source left.
  RunRound(-1, &pids);
  EXPECT_EQ(SegmentsOf(pids), 0) << "segment files of killed sources left";
}

}  // namespace
}  // namespace vsocket_preload_test
