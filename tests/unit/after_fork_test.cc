// base/after_fork.h: the work registered for forked children runs once in
// each child, when the child asks after fork() returned, and never in the
// parent or inside fork().
#include "base/after_fork.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>

namespace vsocket::sys {
namespace {

std::atomic<int> g_runs{0};
void CountRun() { g_runs.fetch_add(1); }

TEST(AfterFork, RunsOnceInEachChildAndNeverInTheParent) {
  ASSERT_TRUE(RunInEachForkedChild(&CountRun));
  RunForkedChildWork();
  EXPECT_EQ(g_runs.load(), 0);  // this process forked nothing yet
  for (int child = 0; child < 2; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The exit code says which step failed.
      if (g_runs.load() != 0) _exit(1);  // nothing ran inside fork()
      RunForkedChildWork();
      if (g_runs.load() != 1) _exit(2);
      RunForkedChildWork();
      if (g_runs.load() != 1) _exit(3);  // once per fork
      // A grandchild runs it again, for itself.
      pid_t grandchild = ::fork();
      if (grandchild == 0) {
        RunForkedChildWork();
        _exit(g_runs.load() == 2 ? 0 : 4);
      }
      int status = 0;
      if (grandchild < 0 || ::waitpid(grandchild, &status, 0) != grandchild) _exit(5);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(6);
      _exit(g_runs.load() == 1 ? 0 : 7);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the step of the child that failed";
  }
  RunForkedChildWork();
  EXPECT_EQ(g_runs.load(), 0);
}

}  // namespace
}  // namespace vsocket::sys
