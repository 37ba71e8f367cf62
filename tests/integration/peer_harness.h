// Running vsocket_testpeer processes from a test and collecting their
// reports. Thin layer over tests/support/process.h that knows the test
// peer's command line and output protocol (see testpeer.cc).
#ifndef VSOCKET_TESTS_INTEGRATION_PEER_HARNESS_H_
#define VSOCKET_TESTS_INTEGRATION_PEER_HARNESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peer_output.h"
#include "process.h"

namespace vsocket_test {

using namespace std::chrono_literals;

using Env = std::map<std::string, std::string>;

// One test peer process: --plain or vsocket, the mode and its arguments
// (plus any role option such as {"--conns", "2"}), its environment.
struct PeerSpec {
  bool plain = false;
  std::vector<std::string> args;
  Env env;
  std::vector<std::pair<int, int>> inherit_fds;  // (parent fd, child fd)
};

struct Started {
  std::unique_ptr<Child> child;  // null if the start failed; see error
  int port = -1;                 // servers: the port they listen on
  std::string error;
};

// What a finished peer reported.
struct PeerResult {
  ExitStatus status;
  std::string out, err;
  std::vector<Record> records;

  bool ok() const { return status.exited && status.code == 0; }
  // First record with this tag; a record tagged "<no TAG line>" (all fields
  // "<missing>") if there is none.
  Record One(std::string_view tag) const;
  std::vector<Record> All(std::string_view tag) const;
  // Exit status, stdout and the tail of stderr, for failure messages.
  std::string Describe() const;
};

// "vsocket_testpeer [--plain] server --port 0 ARGS"; waits up to 10 s for the
// port line.
Started StartServer(const PeerSpec& spec);
// "vsocket_testpeer [--plain] client --port PORT ARGS".
Started StartClient(const PeerSpec& spec, int port);
// Waits (killing at the deadline) and parses the output.
PeerResult Finish(Child& child, milliseconds timeout);

struct PairResult {
  PeerResult server, client;
  std::string error;  // non-empty if a peer could not be started
};
// Starts server then client, waits for the client (up to `timeout`), then
// for the server (up to 10 s more).
PairResult RunPair(const PeerSpec& server, const PeerSpec& client,
                   milliseconds timeout);

// /dev/shm/vsocket-<uid>: where the library keeps ring files for `uid`.
std::string ShmDir(uid_t uid);

// Success iff the peer printed at least one conn line and every conn and
// done line says path=PATH reason=REASON (checked both right after the
// connection was established and just before it was closed).
testing::AssertionResult TookPath(const PeerResult& peer, std::string_view path,
                                  std::string_view reason);

// Success iff `sender` reported sending `bytes` bytes hashing to
// `expected_sha256` and `receiver` received exactly that up to EOF.
testing::AssertionResult DataIntact(const PeerResult& sender, const PeerResult& receiver,
                                    uint64_t bytes, const std::string& expected_sha256);

// Environment presets.
Env Auto();                  // VSOCKET_TRANSPORT=auto
Env ForceTcp();              // VSOCKET_TRANSPORT=tcp
Env WithStats(Env env);      // + VSOCKET_STATS=1

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_INTEGRATION_PEER_HARNESS_H_
