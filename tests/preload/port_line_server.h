// A server program that prints the port it listens on as its first stdout
// line (the python3 scripts in scripts/), and one client run against it:
// the plumbing the python3 pair tests share.  Test code: a server that
// cannot start or prints no port line is a failed expectation.
#ifndef VSOCKET_TESTS_PRELOAD_PORT_LINE_SERVER_H_
#define VSOCKET_TESTS_PRELOAD_PORT_LINE_SERVER_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "preload_harness.h"

namespace vsocket_preload_test {

struct ServedRun {
  bool ran = false;  // the server printed its port and the client ran
  Result server, client;
};

// Starts `server_argv` (up to 20 s for its port line), runs
// client_argv(port) to completion (up to `client_timeout`), then sends
// `stop_signal` to the server (0: none; it ends by itself) and waits up to
// 10 s for it.
inline ServedRun RunAgainstServer(
    const std::vector<std::string>& server_argv, const Options& server_options,
    const std::function<std::vector<std::string>(const std::string& port)>& client_argv,
    const Options& client_options, Ms client_timeout = Ms(40000), int stop_signal = 0) {
  ServedRun r;
  auto server = Process::Start(server_argv, server_options);
  EXPECT_TRUE(server);
  if (!server) return r;
  std::string port = server->WaitForLine(Ms(20000));
  EXPECT_FALSE(port.empty()) << server->Stderr();
  if (port.empty()) return r;
  r.client = Run(client_argv(port), client_options, client_timeout);
  if (stop_signal != 0) ::kill(server->pid(), stop_signal);
  r.server.exit = server->Wait(Ms(10000));
  r.server.out = server->Stdout();
  r.server.err = server->Stderr();
  r.ran = true;
  return r;
}

}  // namespace vsocket_preload_test

#endif  // VSOCKET_TESTS_PRELOAD_PORT_LINE_SERVER_H_
