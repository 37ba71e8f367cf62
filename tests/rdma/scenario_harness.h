// Scaffolding shared by the two-process RDMA test programs
// (rdma_transport_test, rdma_zerocopy_test): failure reporting, the
// control channel between a scenario's server and client children, vsocket
// listen/connect helpers on the guest's rxe address, and the scenario
// runner that main() hands its scenarios to.  Each program keeps its own
// scenarios and scenario-specific helpers.
//
// A program's process tree: main (role "main") forks one child per
// scenario; the scenario's RunPair() forks a server and a client child.
// Every failure ends the failing process with exit status 1 after one
// "FAIL [scenario/role] file:line: message (errno N text)" line on stderr.
#ifndef VSOCKET_TESTS_RDMA_SCENARIO_HARNESS_H_
#define VSOCKET_TESTS_RDMA_SCENARIO_HARNESS_H_

#include <netinet/in.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>

#include "child_check.h"
#include "clock.h"
#include "control_channel.h"
#include "stream_endpoints.h"

namespace vsocket_rdma_test {

// Exit status of a program that found no RDMA device (ctest SKIP_RETURN_CODE).
constexpr int kSkipExitCode = 77;

// Failure lines (CHECK, CHECK_ERR), the clock, the control channel and the
// guest's address come from tests/support/.  The running scenario's name
// is vsocket_test::g_scope, set by RunScenarios().  g_role: this process's
// role in Fail() lines: "main", then "server" or "client" in RunPair()'s
// children.  A scenario may set its own (e.g. in a child it forks).
using vsocket_test::Fail;
using vsocket_test::g_role;
using vsocket_test::NowUs;
using vsocket_test::SelfIp;

// The IPv4 address ip:port; Fail()s on a malformed `ip`.
inline sockaddr_in Addr(const char* ip, int port) { return vsocket_test::Ipv4(ip, port); }

// Control channel between a scenario's two children (control_channel.h):
// the server uses side 0, the client side 1.
using Ctl = vsocket_test::ControlPair;

// A vsocket listener (SO_REUSEADDR, backlog 16) on SelfIp():0; returns its
// fd and stores the bound port in *port.  Fail()s on any error.
int Listen(int* port);

// A vsocket connection to SelfIp():port; Fail()s if it cannot connect.  If
// `elapsed_us` is given, stores how long vsocket_connect() took.
int Connect(int port, int64_t* elapsed_us = nullptr);

// Runs `server` and `client` in two forked children (roles "server" and
// "client") joined by a Ctl, each child _exit(0)ing when its function
// returns; waits for both.  Returns 0 if both exited 0 (the server may also
// have died of SIGKILL: the kill scenarios kill it on purpose), else prints
// the failed child's wait status to stderr and returns 1.  The client gets
// the server's pid.  If RunScenarios() was given a pair_alarm_s, each child
// calls alarm(pair_alarm_s) first, so that a hang ends in SIGALRM.
int RunPair(const std::function<void(Ctl&)>& server,
            const std::function<void(Ctl&, pid_t server_pid)>& client);

// Whether /sys/class/infiniband lists any device.
bool HaveDevice();

// A named scenario: returns 0 on success (typically RunPair()'s result).
struct Scenario {
  const char* name;
  int (*run)();
};

// main() of a scenario program.  Without an RDMA device prints
// "SKIP: no RDMA device (...)" and returns kSkipExitCode.  Otherwise runs
// the scenarios named in argv[1..] (all of them without arguments), in the
// order of `all`, each in a forked child; prints "PASS name (x.xx s)" or
// "FAIL name (x.xx s)" after each and "N passed, M failed" at the end;
// returns 0 if none failed, else 1.  stdout is made line-buffered.
// pair_alarm_s: see RunPair() (0: no alarm).
int RunScenarios(int argc, char** argv, std::span<const Scenario> all,
                 unsigned pair_alarm_s = 0);

}  // namespace vsocket_rdma_test

#endif  // VSOCKET_TESTS_RDMA_SCENARIO_HARNESS_H_
