#include "forked_pair.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "child_check.h"
#include "clock.h"

namespace vsocket_test {
namespace {

[[noreturn]] void RunChild(const char* role, int keep, ControlPair& ctl,
                           unsigned watchdog_s, const std::function<void()>& fn) {
  g_role = role;
  close(ctl.fds[1 - keep]);
  if (watchdog_s > 0) alarm(watchdog_s);
  fn();
  fflush(stdout);
  _exit(0);
}

// Waits for both children; with a deadline, SIGKILLs those still running.
void WaitBoth(pid_t pids[2], EndStatus* ends[2], int64_t deadline_ms) {
  if (deadline_ms <= 0) {
    for (int i : {1, 0}) {
      if (ends[i]->started) waitpid(pids[i], &ends[i]->status, 0);
    }
    return;
  }
  const int64_t deadline = NowMs() + deadline_ms;
  bool done[2] = {!ends[0]->started, !ends[1]->started};
  while (!done[0] || !done[1]) {
    for (int i = 0; i < 2; ++i) {
      if (!done[i] && waitpid(pids[i], &ends[i]->status, WNOHANG) == pids[i]) {
        done[i] = true;
      }
    }
    if (NowMs() > deadline) {
      for (int i = 0; i < 2; ++i) {
        if (done[i]) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], &ends[i]->status, 0);
        ends[i]->killed = done[i] = true;
      }
    }
    if (!done[0] || !done[1]) usleep(2000);
  }
}

}  // namespace

bool EndStatus::ExitedZero() const {
  return started && !killed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string EndStatus::Describe(const char* role) const {
  if (!started) return std::string(role) + ": fork failed; ";
  if (killed) return std::string(role) + ": still running at the deadline (SIGKILLed); ";
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return "";
    return std::string(role) + ": exit " + std::to_string(WEXITSTATUS(status)) + "; ";
  }
  std::string s = std::string(role) + ": killed by signal " +
                  std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status));
  if (WTERMSIG(status) == SIGALRM) s += ", the end's watchdog";
  return s + "); ";
}

PairStatus ForkPair(const ServerFn& server, const ClientFn& client,
                    ForkPairOptions options) {
  PairStatus result;
  ControlPair ctl;
  if (!ctl.Open()) {
    result.error = std::string("socketpair: ") + strerror(errno);
    return result;
  }
  fflush(stdout);  // or both children would print what the parent buffered
  fflush(stderr);
  pid_t pids[2];
  pids[0] = fork();
  if (pids[0] == 0) {
    RunChild("server", 0, ctl, options.watchdog_s, [&] { server(ctl); });
  }
  pids[1] = fork();
  if (pids[1] == 0) {
    RunChild("client", 1, ctl, options.watchdog_s, [&] { client(ctl, pids[0]); });
  }
  close(ctl.fds[0]);
  close(ctl.fds[1]);
  result.server.started = pids[0] > 0;
  result.client.started = pids[1] > 0;
  EndStatus* ends[2] = {&result.server, &result.client};
  WaitBoth(pids, ends, options.deadline_ms);
  if (!result.server.started || !result.client.started) result.error = "fork failed";
  return result;
}

}  // namespace vsocket_test
