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

#include <errno.h>
#include <string.h>

#include <cstdint>
#include <functional>
#include <string>

#include "socket_api.h"
#include "transports.h"

namespace conformance {

// "server" or "client" in an end, "main" in the gtest process.
extern const char* g_role;

// Prints the FAIL line (with the current errno) and _exit(1)s.
[[noreturn]] void Fail(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                                 \
  do {                                                                   \
    if (!(cond)) ::conformance::Fail(__FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)

// `expr` (evaluated once, errno cleared first) returns -1 with errno `e`.
#define CHECK_ERR(expr, e)                                                  \
  do {                                                                      \
    errno = 0;                                                              \
    long long rc_ = static_cast<long long>(expr);                           \
    CHECK(rc_ == -1 && errno == (e), "%s: rc %lld, want -1/%s", #expr, rc_, \
          strerror(e));                                                     \
  } while (0)

// `expr` returns exactly `want` (a count or 0).
#define CHECK_RC(expr, want)                                               \
  do {                                                                     \
    errno = 0;                                                             \
    long long rc_ = static_cast<long long>(expr);                          \
    CHECK(rc_ == static_cast<long long>(want), "%s: rc %lld, want %lld",   \
          #expr, rc_, static_cast<long long>(want));                       \
  } while (0)

// CLOCK_MONOTONIC in milliseconds.
int64_t NowMs();

// Control channel to the other end: a plain AF_UNIX socket (not vsocket).
// Fail()s if the other end went away.
struct Ctl {
  int fd = -1;
  void Send(int64_t value);
  int64_t Recv();
};

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
