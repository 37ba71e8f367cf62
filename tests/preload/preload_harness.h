// Runs test programs with and without libvsocket_preload.so and reads their
// VSOCKET_STATS lines.  Nothing here can hang a test: every child runs in its
// own process group, and a child still running at its deadline (or when its
// Process object dies) is SIGKILLed with its whole group.
#ifndef VSOCKET_TESTS_PRELOAD_PRELOAD_HARNESS_H_
#define VSOCKET_TESTS_PRELOAD_PRELOAD_HARNESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vsocket_preload_test {

using Ms = std::chrono::milliseconds;

// Paths fixed at build time.
std::string RunnerPath();        // vsocket-run
std::string ProgramPath(const std::string& name);  // a test program
std::string TempDir();           // a fresh directory for this test

struct Options {
  bool preload = true;             // run through `vsocket-run --stats`
  std::vector<std::string> run_options;  // extra vsocket-run options
  std::map<std::string, std::string> env;  // added to a clean environment
  std::string stdin_path;          // default /dev/null
  std::string stdout_path;         // default: captured
};

struct Exit {
  bool timed_out = false;
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string ToString() const;
  bool Ok() const { return exited && code == 0; }
};

class Process {
 public:
  // argv[0] is a path or a name searched in PATH.
  static std::unique_ptr<Process> Start(const std::vector<std::string>& argv,
                                        const Options& options);
  ~Process();
  pid_t pid() const { return pid_; }
  Exit Wait(Ms timeout);
  bool Running();
  std::string Stdout() const;
  std::string Stderr() const;
  // Waits until stdout has a line; returns it ("" on timeout or exit).
  std::string WaitForLine(Ms timeout);

 private:
  Process() = default;
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
  bool reaped_ = false;
  Exit exit_;
};

// Runs to completion (or the timeout).
struct Result {
  Exit exit;
  std::string out, err;
};
Result Run(const std::vector<std::string>& argv, const Options& options,
           Ms timeout = Ms(30000));

// The VSOCKET_STATS lines of a process tree, summed.
struct Stats {
  int lines = 0;
  int64_t shm_connections = 0, shm_sent = 0, shm_received = 0;
  int64_t tcp_connections = 0, tcp_sent = 0, tcp_received = 0;
  std::map<std::string, int64_t> reasons;
  int64_t Reason(const std::string& name) const {
    auto it = reasons.find(name);
    return it == reasons.end() ? 0 : it->second;
  }
};
Stats ParseStats(const std::string& stderr_text);

// A TCP port that was free a moment ago (bound to 0, then released).
int PickFreePort();
// True once something listens on 127.0.0.1/[::]/[::1] `port` (reads
// /proc/net/tcp*), false after `timeout`.
bool WaitForListener(int port, Ms timeout);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);
// Random-looking deterministic bytes.
std::string PatternBytes(size_t size, uint32_t seed);
// `sha256sum` of a file, via the coreutils program.
std::string Sha256Of(const std::string& path);
// The python3 interpreter itself (not a pyenv shim script).
std::string Python3();

}  // namespace vsocket_preload_test

#endif  // VSOCKET_TESTS_PRELOAD_PRELOAD_HARNESS_H_
