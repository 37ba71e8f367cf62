// base/private_fd: where vsocket's own descriptors live, and that they never
// take the numbers the application would get.  Each case runs in a forked
// child, since lowering the hard limit cannot be undone.
#include "base/private_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

// Runs `body` in a child under RLIMIT_NOFILE soft:hard; the child exits 0
// when every check held, else with the number of the failed check.
int InChild(rlim_t soft, rlim_t hard, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {soft, hard};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(100);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST(PrivateFd, AboveTheSoftLimitUntilFullThenEmfileNeverBelow) {
  int r = InChild(64, 128, [] {
    vsocket::sys::PrivateFdRange range = vsocket::sys::CurrentPrivateFdRange();
    if (range.shares_app_table || range.soft_limit != 64 || range.room_above != 64) return 1;
    std::vector<int> copies;
    for (;;) {
      int c = vsocket::sys::DupPrivate(0);
      if (c < 0) {
        if (errno != EMFILE) return 2;
        break;
      }
      if (c < 64 || c >= 128) return 3;
      copies.push_back(c);
    }
    if (copies.size() != 64) return 4;
    // The application's own numbers are all still there.
    int own = open("/dev/null", O_RDONLY);
    if (own < 0 || own >= 64) return 5;
    // The soft limit was put back.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 64) return 6;
    return 0;
  });
  EXPECT_EQ(r, 0);
}

TEST(PrivateFd, SoftEqualsHardSharesTheApplicationsTable) {
  int r = InChild(256, 256, [] {
    vsocket::sys::PrivateFdRange range = vsocket::sys::CurrentPrivateFdRange();
    if (!range.shares_app_table || range.soft_limit != 256) return 1;
    int c = vsocket::sys::DupPrivate(0);
    if (c < 128 || c >= 256) return 2;  // the upper half of the table
    return 0;
  });
  EXPECT_EQ(r, 0);
}

// A snapshot reads the limit once for a burst: a change inside it is not
// seen (no getrlimit per descriptor), the next burst sees it, and the
// descriptors made meanwhile land where the snapshot's limits put them.
// (Only another thread could change the limit during a real burst; the
// raise for each descriptor then puts back what the snapshot read, as it
// put back what its own getrlimit read before: base/private_fd.h.)
TEST(PrivateFd, SnapshotReadsTheLimitOncePerBurst) {
  int r = InChild(64, 128, [] {
    {
      vsocket::sys::NofileLimitSnapshot snapshot;
      struct rlimit lower = {48, 128};
      if (setrlimit(RLIMIT_NOFILE, &lower) != 0) return 1;
      if (vsocket::sys::CurrentPrivateFdRange().soft_limit != 64) return 2;
      {
        vsocket::sys::NofileLimitSnapshot nested;  // reads nothing new
        if (vsocket::sys::CurrentPrivateFdRange().soft_limit != 64) return 3;
      }
      int c = vsocket::sys::DupPrivate(0);
      if (c < 64 || c >= 128) return 4;
      close(c);
      if (setrlimit(RLIMIT_NOFILE, &lower) != 0) return 5;
    }
    // Outside any snapshot: read now.
    if (vsocket::sys::CurrentPrivateFdRange().soft_limit != 48) return 7;
    vsocket::sys::NofileLimitSnapshot next;
    if (vsocket::sys::CurrentPrivateFdRange().soft_limit != 48) return 8;
    return 0;
  });
  EXPECT_EQ(r, 0);
}

// Threads of one process make private descriptors at once (a client that
// connects from several threads).  None may read the soft limit while
// another has it raised: it would then either dup below a limit already
// put back (EINVAL, the RDMA transport's setup failing after the peer had
// paired: CI, stop 27) or put back the raised value for good.
TEST(PrivateFd, ConcurrentThreadsNeverSeeAnotherThreadsRaise) {
  int r = InChild(64, 128, [] {
    std::atomic<int> failures{0};
    std::atomic<int> below{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 20000; ++i) {
          int c = vsocket::sys::DupPrivate(0);
          if (c < 0) {
            failures.fetch_add(1);
            continue;
          }
          if (c < 64) below.fetch_add(1);
          close(c);
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failures.load() != 0) return 1;
    if (below.load() != 0) return 2;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 64) return 3;
    return 0;
  });
  EXPECT_EQ(r, 0);
}

// A thread forks while another is inside a raise.  The child must neither
// inherit the raised soft limit nor a held lock (its first private
// descriptor would wait for ever).
TEST(PrivateFd, AForkDuringAnotherThreadsRaiseLeavesAUsableChild) {
  int r = InChild(64, 128, [] {
    std::atomic<bool> stop{false};
    std::thread hammer([&] {
      while (!stop.load()) {
        int c = vsocket::sys::DupPrivate(0);
        if (c >= 0) close(c);
      }
    });
    int result = 0;
    for (int i = 0; i < 200 && result == 0; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        alarm(5);  // a held lock: killed, reported below
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 64) _exit(1);
        int c = vsocket::sys::DupPrivate(0);
        _exit(c >= 64 && c < 128 ? 0 : 2);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status)) result = 10;
      else if (WEXITSTATUS(status) != 0) result = 10 + WEXITSTATUS(status);
    }
    stop.store(true);
    hammer.join();
    return result;
  });
  EXPECT_EQ(r, 0);
}

// A private number above the soft limit can be made to name another file:
// dup3 alone refuses it (EBADF), as the kernel bounds new numbers by the
// soft limit.  The RDMA transport swaps a connection's numbers this way.
TEST(PrivateFd, ReplacePrivateReachesNumbersAboveTheSoftLimit) {
  int r = InChild(64, 128, [] {
    int c = vsocket::sys::DupPrivate(0);
    if (c < 64) return 1;
    int p[2];
    if (pipe(p) != 0) return 2;
    if (dup3(p[0], c, O_CLOEXEC) != -1 || errno != EBADF) return 3;
    if (vsocket::sys::ReplacePrivate(p[0], c) != 0) return 4;
    struct stat a, b;
    if (fstat(p[0], &a) != 0 || fstat(c, &b) != 0 || a.st_ino != b.st_ino) return 5;
    if (!(fcntl(c, F_GETFD) & FD_CLOEXEC)) return 6;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 64) return 7;
    return 0;
  });
  EXPECT_EQ(r, 0);
}

}  // namespace
