// Running a real server/client program pair (nc, socat, iperf3) with either
// end preloaded or not, on a free loopback port.
#ifndef VSOCKET_TESTS_PRELOAD_REAL_PROGRAMS_H_
#define VSOCKET_TESTS_PRELOAD_REAL_PROGRAMS_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "preload_harness.h"

namespace vsocket_preload_test {

struct PairOutcome {
  Result server, client;
  bool started = false;
};

// `server_argv(port)` must listen on 127.0.0.1:port and exit after one
// client; `client_argv(port)` connects.  Retries with another port when the
// server could not start listening (the port was taken meanwhile).
inline PairOutcome RunPair(
    const std::function<std::vector<std::string>(int)>& server_argv,
    const std::function<std::vector<std::string>(int)>& client_argv,
    const Options& server_options, const Options& client_options,
    Ms timeout = Ms(40000)) {
  PairOutcome o;
  for (int attempt = 0; attempt < 3 && !o.started; ++attempt) {
    int port = PickFreePort();
    auto server = Process::Start(server_argv(port), server_options);
    if (!server) continue;
    if (!WaitForListener(port, Ms(10000))) {
      server->Wait(Ms(100));
      continue;
    }
    o.started = true;
    o.client = Run(client_argv(port), client_options, timeout);
    o.server.exit = server->Wait(Ms(15000));
    o.server.out = server->Stdout();
    o.server.err = server->Stderr();
  }
  EXPECT_TRUE(o.started) << "the server never listened";
  EXPECT_TRUE(o.client.exit.Ok()) << "client: " << o.client.exit.ToString()
                                  << "\n" << o.client.out << o.client.err;
  EXPECT_TRUE(o.server.exit.Ok()) << "server: " << o.server.exit.ToString()
                                  << "\n" << o.server.out << o.server.err;
  return o;
}

// Expectations on one preloaded end.
inline void ExpectShm(const Result& r, int64_t connections) {
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.shm_connections, connections) << r.err;
  EXPECT_EQ(s.tcp_connections, 0) << r.err;
}

inline void ExpectTcpFallback(const Result& r, int64_t connections) {
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.shm_connections, 0) << r.err;
  EXPECT_EQ(s.tcp_connections, connections) << r.err;
  EXPECT_EQ(s.Reason("peer_not_vsocket"), connections) << r.err;
}

inline Options Preloaded(bool on) {
  Options o;
  o.preload = on;
  return o;
}

}  // namespace vsocket_preload_test

#endif  // VSOCKET_TESTS_PRELOAD_REAL_PROGRAMS_H_
