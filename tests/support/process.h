// Spawning test peer processes: explicit environment, captured output,
// bounded waits. Nothing here can hang a test: every wait has a deadline and
// a child still running at its deadline (or at destruction) is SIGKILLed
// together with its process group (so forked workers die too).
#ifndef VSOCKET_TESTS_SUPPORT_PROCESS_H_
#define VSOCKET_TESTS_SUPPORT_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vsocket_test {

using std::chrono::milliseconds;

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the executable path
  // Added to the parent's environment, after every VSOCKET_* variable of the
  // parent has been removed (so the test, not the shell, decides them).
  std::map<std::string, std::string> env;
  // (parent fd, child fd): descriptors the child inherits at a chosen number.
  std::vector<std::pair<int, int>> inherit_fds;
};

struct ExitStatus {
  bool timed_out = false;  // killed by Wait() at its deadline
  bool exited = false;     // normal exit; code valid
  int code = -1;
  int signal = 0;          // terminating signal when !exited
  std::string ToString() const;
};

class Child {
 public:
  // Starts the child in its own process group with stdin /dev/null and
  // stdout/stderr captured in memory files. Returns nullptr (and sets *error)
  // if the child could not be started.
  static std::unique_ptr<Child> Spawn(const SpawnOptions& options,
                                      std::string* error);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // Everything the child (and its descendants) wrote so far.
  std::string Stdout() const;
  std::string Stderr() const;

  // Waits until stdout holds a complete line whose first word is `tag`;
  // returns that line, or nullopt if the child exited or time ran out first.
  std::optional<std::string> WaitForLine(std::string_view tag,
                                         milliseconds timeout);

  // Reaps the child, SIGKILLing its process group if it is still running
  // after `timeout`. Idempotent: later calls return the same status.
  ExitStatus Wait(milliseconds timeout);

  // False once the child has exited (it is then reaped).
  bool Running() { return !Reap(false); }

  // Sends sig to the child process only (not its group).
  void Signal(int sig);

 private:
  Child() = default;
  bool Reap(bool block);  // true once the child has been reaped

  pid_t pid_ = -1;
  int out_fd_ = -1;  // memfd the child's stdout points at
  int err_fd_ = -1;
  bool reaped_ = false;
  ExitStatus status_;
};

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_PROCESS_H_
