// One connection between two forked processes ("server" accepts, "client"
// connects) on a chosen Transport, and the checks a case makes inside them.
//
// The gtest process never calls vsocket: each end is a fork that sets
// VSOCKET_TRANSPORT before its first vsocket call (the configuration is
// read once per process).  Each end checks that vsocket_transport_name()
// names the expected path, runs its half of the case, meets the other end
// at a barrier, closes its socket (unless the case did) and _exit(0)s.  A
// failing check prints one "FAIL [case/role] file:line: ..." line on stderr
// and _exit(1)s.  Nothing hangs: each end has an alarm() watchdog and the
// parent SIGKILLs an end still running after the watchdog plus a grace.
#ifndef VSOCKET_TESTS_CONFORMANCE_PAIR_HARNESS_H_
#define VSOCKET_TESTS_CONFORMANCE_PAIR_HARNESS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "child_check.h"
#include "clock.h"
#include "control_channel.h"
#include "socket_api.h"
#include "transports.h"

namespace conformance {

// The shared failure reporting (CHECK, CHECK_ERR, CHECK_RC), clock and
// control channel (tests/support/).  g_role: "server" or "client" in an
// end, "main" in the gtest process.
using vsocket_test::Fail;
using vsocket_test::g_role;
using vsocket_test::NowMs;
using Ctl = vsocket_test::ControlEnd;

// One end of the connection, inside its process.
struct End {
  const SocketApi& api;
  int fd;    // the connected socket; set to -1 after closing it yourself
  Ctl ctl;   // to the other end

  // Blocking send / recv of exactly len bytes; Fail() otherwise.
  void SendAll(const void* buf, size_t len);
  void RecvAll(void* buf, size_t len);
  // Sets or clears O_NONBLOCK with api.fcntl.
  void SetNonBlocking(bool on);
  // api.poll for `events`; the revents, 0 after timeout_ms.
  short Poll(short events, int timeout_ms);
  // Sends a token and waits for the other end's.
  void Barrier();
  // api.close(fd); fd = -1.
  void Close();
};

using EndFn = std::function<void(End&)>;

struct PairOptions {
  unsigned watchdog_s = 10;  // alarm() in each end (a case takes < 1 s)
};

// Runs server and client ends of one connection on `transport`; returns ""
// if both exited 0, else what went wrong with which end.
std::string RunPair(const Transport& transport, const char* case_name,
                    const EndFn& server, const EndFn& client,
                    PairOptions options = {});

}  // namespace conformance

#endif  // VSOCKET_TESTS_CONFORMANCE_PAIR_HARNESS_H_
