// Shared by the real-program tests (tests/apps/): a long-running server
// (redis-server, nginx, memcached, sockperf) started on a free loopback port
// with or without the interposer, clients run against it, and the server
// stopped with a signal so that it exits normally and prints its
// VSOCKET_STATS line.  Built on the preload harness (tests/preload/): every
// child runs in its own process group and is SIGKILLed at its deadline.
#ifndef VSOCKET_TESTS_APPS_APP_TEST_H_
#define VSOCKET_TESTS_APPS_APP_TEST_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "preload_harness.h"

namespace vsocket_preload_test {

// The absolute path of `name` in PATH (plus the sbin directories, where
// nginx lives), or "" when it is not installed.
inline std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return access(name.c_str(), X_OK) == 0 ? name : "";
  }
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  path += ":/usr/local/sbin:/usr/sbin:/sbin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string full = dir + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

// Skips the test (with the reason) unless every program is installed.
#define VSA_REQUIRE_PROGRAMS(...)                                          \
  do {                                                                     \
    for (const std::string& vsa_p : std::vector<std::string>{__VA_ARGS__}) { \
      if (vsocket_preload_test::FindProgram(vsa_p).empty())               \
        GTEST_SKIP() << vsa_p << " is not installed";                      \
    }                                                                      \
  } while (0)

inline Options Preloaded(bool on) {
  Options o;
  o.preload = on;
  return o;
}

// A server listening on 127.0.0.1:port().
class Server {
 public:
  // `argv(port)` must listen on 127.0.0.1:port.  Retries with another port
  // when nothing listened within 10 s (the port was taken meanwhile).
  static std::unique_ptr<Server> Start(
      const std::function<std::vector<std::string>(int)>& argv,
      const Options& options) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      int port = PickFreePort();
      auto p = Process::Start(argv(port), options);
      if (!p) continue;
      if (!WaitForListener(port, Ms(10000))) {
        p->Wait(Ms(100));
        continue;
      }
      std::unique_ptr<Server> s(new Server());
      s->port_ = port;
      s->process_ = std::move(p);
      return s;
    }
    return nullptr;
  }
  int port() const { return port_; }
  bool Running() { return process_->Running(); }
  // Sends `sig` and waits for the exit; the process is SIGKILLed if it has
  // not exited by `timeout`.
  Result Stop(int sig = SIGTERM, Ms timeout = Ms(15000)) {
    Result r;
    if (process_->Running()) kill(process_->pid(), sig);
    r.exit = process_->Wait(timeout);
    r.out = process_->Stdout();
    r.err = process_->Stderr();
    return r;
  }
  std::string Stderr() const { return process_->Stderr(); }

 private:
  Server() = default;
  int port_ = 0;
  std::unique_ptr<Process> process_;
};

inline std::string Describe(const Result& r) {
  return r.exit.ToString() + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

#define EXPECT_RUN_OK(r) EXPECT_TRUE((r).exit.Ok()) << vsocket_preload_test::Describe(r)

// One preloaded end whose peers were all preloaded: shared memory only.
// `idle_tcp_ok`: kernel-TCP connections that carried no byte are tolerated
// (wrk first opens a probe connection and closes it at once, before the
// vsocket handshake completes: wrk counts it offer_revoked, nginx
// peer_not_vsocket or offer_revoked).
inline void ExpectShmPath(const Result& r, int64_t min_connections = 1,
                          bool idle_tcp_ok = false) {
  Stats s = ParseStats(r.err);
  EXPECT_GE(s.lines, 1) << "no VSOCKET_STATS line\n" << r.err;
  EXPECT_GE(s.shm_connections, min_connections) << r.err;
  if (!idle_tcp_ok) {
    EXPECT_EQ(s.tcp_connections, 0) << r.err;
  }
  EXPECT_EQ(s.tcp_sent + s.tcp_received, 0) << r.err;
  EXPECT_GT(s.shm_sent, 0) << r.err;
  EXPECT_GT(s.shm_received, 0) << r.err;
}

// One preloaded end whose peers were not preloaded: kernel TCP, every
// connection for the reason peer_not_vsocket.
inline void ExpectTcpFallbackPath(const Result& r, int64_t min_connections = 1) {
  Stats s = ParseStats(r.err);
  EXPECT_GE(s.lines, 1) << "no VSOCKET_STATS line\n" << r.err;
  EXPECT_EQ(s.shm_connections, 0) << r.err;
  EXPECT_GE(s.tcp_connections, min_connections) << r.err;
  EXPECT_EQ(s.Reason("peer_not_vsocket"), s.tcp_connections) << r.err;
  EXPECT_GT(s.tcp_sent + s.tcp_received, 0) << r.err;
}

// The number after the first match of `prefix` in `text`, or -1.
inline double NumberAfterText(const std::string& text, const std::string& prefix) {
  size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  const char* p = text.c_str() + at + prefix.size();
  while (*p == ' ' || *p == '=' || *p == ':' || *p == '\t') ++p;
  char* end = nullptr;
  double v = std::strtod(p, &end);
  return end == p ? -1 : v;
}

}  // namespace vsocket_preload_test

#endif  // VSOCKET_TESTS_APPS_APP_TEST_H_
