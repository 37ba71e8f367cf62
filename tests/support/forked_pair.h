// Two forked processes, a server and a client, joined by a control channel:
// the process layout of the tests whose ends must each be a fresh process
// (vsocket reads its configuration once per process, and a test that kills
// or corrupts one end must not take the gtest process with it).
//
// ForkPair() forks the server (role "server", control side 0) and then the
// client (role "client", side 1, told the server's pid).  Each child closes
// the other side, arms alarm(watchdog_s) if asked, runs its function and
// _exit(0)s after flushing stdout; a failed CHECK ends it with 1 (see
// child_check.h).  The parent closes both sides and waits for both; it never
// calls a function.
#ifndef VSOCKET_TESTS_SUPPORT_FORKED_PAIR_H_
#define VSOCKET_TESTS_SUPPORT_FORKED_PAIR_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "control_channel.h"

namespace vsocket_test {

struct ForkPairOptions {
  // alarm() in each child (0: none), so that a hang ends in SIGALRM.
  unsigned watchdog_s = 0;
  // The parent SIGKILLs a child still running this long after the fork
  // (0: waits as long as it takes).
  int64_t deadline_ms = 0;
};

// How one child ended.
struct EndStatus {
  bool started = false;  // fork() succeeded
  int status = 0;        // waitpid() status
  bool killed = false;   // SIGKILLed by the parent at the deadline

  bool ExitedZero() const;
  // "" when it exited 0, else "<role>: what happened; ".
  std::string Describe(const char* role) const;
};

struct PairStatus {
  EndStatus server, client;
  std::string error;  // the socketpair or a fork failed
};

using ServerFn = std::function<void(ControlPair& ctl)>;
using ClientFn = std::function<void(ControlPair& ctl, pid_t server_pid)>;

// REQUIRES: called from a single-threaded process (it forks).
PairStatus ForkPair(const ServerFn& server, const ClientFn& client,
                    ForkPairOptions options = {});

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_FORKED_PAIR_H_
