// A vsocket connect whose RDMA probe succeeded but whose kernel TCP connect
// is then refused must fail as kernel TCP does: ECONNREFUSED, never the
// errno the withdrawal of the RDMA offer leaves behind (EAGAIN from
// draining the channel's non-blocking CM event channel).
//
// This is the interleaving of the kill loop (tests/integration/
// kill_loop_test.cc, rdma build, VSOCKET_KILL_LOOP_SEED=1796525170) where a
// victim server was SIGKILLed after its progress thread had answered the
// client's RDMA CM probe and before the client's SYN: the SYN met no
// listener.  Here it is forced, two ways:
//  - server_killed (the kill loop's case): the server's accept queue is
//    full, so the client's SYN is dropped after its probe succeeded and it
//    waits in connect() for the retransmission; meanwhile the server is
//    SIGKILLed: the client's channel sees the disconnect (its readiness
//    socket turns readable), and the retransmitted SYN is refused.  Before
//    the fix vsocket_connect failed with EAGAIN here, every run.
//  - blocking, nonblocking: the server stays alive; its kernel listener is
//    stopped with shutdown(SHUT_RD) (the kernel's own call, not vsocket's)
//    while its RDMA CM listener keeps answering.  These passed before the
//    fix only by chance: the teardown's last failing call was a token sent
//    to the already closed user end of the readiness socket, whose errno
//    happens to be ECONNREFUSED too.
// Each scenario runs on both paths, pinned whatever the default: over a
// link (VSOCKET_RDMA_LINKS=1: the probe is an OPEN answered by ACCEPT on
// the link, the withdrawal a RESET of that slot) and per connection (NAME
// _per_connection, VSOCKET_RDMA_LINKS=0: a CM connection of its own, whose
// teardown was the EAGAIN above).  That the probe made a channel before the
// SYN is checked on the server, which built (and registered) it; the
// client's own registration happens only once a connection is paired with
// its TCP socket on the link path.
// Two processes in one Soft-RoCE guest (tests/rdma/run-suite.sh); exits 77
// without an RDMA device.
//
//   rdma_connect_refused_test               every scenario
//   rdma_connect_refused_test NAME...       some (server_killed blocking
//                                           nonblocking, each also as
//                                           NAME_per_connection)
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "scenario_harness.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_rdma_test::Addr;
using vsocket_rdma_test::Ctl;
using vsocket_rdma_test::Listen;
using vsocket_rdma_test::RunPair;
using vsocket_rdma_test::RunScenarios;
using vsocket_rdma_test::Scenario;
using vsocket_rdma_test::SelfIp;

// VSOCKET_RDMA_LINKS of the running scenario, set in both processes.
const char* g_links = "1";
void Policy() {
  setenv("VSOCKET_TRANSPORT", "rdma", 1);
  setenv("VSOCKET_RDMA_LINKS", g_links, 1);
}

// A field of this process's "rdma_registered" statistics (-1: absent).
long long Registered(const char* field) {
  std::string json(1 << 16, '\0');
  size_t n = vsocket_stats_json(json.data(), json.size());
  json.resize(n < json.size() - 1 ? n : json.size() - 1);
  size_t at = json.find("\"rdma_registered\":{");
  if (at == std::string::npos) return -1;
  at = json.find(std::string("\"") + field + "\":", at);
  if (at == std::string::npos) return -1;
  return atoll(json.c_str() + at + strlen(field) + 3);
}

// The server: a vsocket listener (RDMA CM listener beside the kernel's),
// whose kernel listener is then stopped: SYNs to the port are refused while
// the RDMA CM listener still answers probes.  Lives until the client is done.
void RefusingServer(Ctl& ctl) {
  Policy();
  int port;
  int lfd = Listen(&port);
  CHECK(shutdown(lfd, SHUT_RD) == 0, "shutdown(SHUT_RD) of the kernel listener");
  ctl.Send(0, port);
  ctl.Recv(0);  // the client is done
  // The client's probe made a channel here before its SYN was refused (the
  // interleaving under test), parked for an accept() that never came.
  long long peak = Registered("peak_bytes");
  CHECK(peak > 0, "no RDMA channel was made before the SYN (server peak_bytes %lld): "
        "the interleaving was not exercised", peak);
  vsocket_close(lfd);
}

// The client's checks common to both scenarios, before its vsocket connect:
// the kernel itself refuses the port (the reference).
sockaddr_in RefusedPort(Ctl& ctl) {
  Policy();
  sockaddr_in a = Addr(SelfIp(), static_cast<int>(ctl.Recv(1)));
  int plain = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(plain >= 0, "socket");
  CHECK_ERR(connect(plain, reinterpret_cast<sockaddr*>(&a), sizeof(a)), ECONNREFUSED);
  close(plain);
  return a;
}

// ...and after it: whatever the probe registered was given back (the
// server checks that it made a channel).
void ProbeWasWithdrawn() {
  long long bytes = Registered("bytes");
  CHECK(bytes <= 0, "%lld registered bytes left after the refused connect", bytes);
}

// --- server_killed: refused after the server died behind the probe --------
int ServerKilled() {
  return RunPair(
      [](Ctl& ctl) {
        Policy();
        int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
        CHECK(lfd >= 0, "socket");
        sockaddr_in a = Addr(SelfIp(), 0);
        CHECK(vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
        CHECK(vsocket_listen(lfd, 0) == 0, "listen");
        socklen_t len = sizeof(a);
        CHECK(vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0,
              "getsockname");
        // Fill the accept queue with plain connections nobody accepts: the
        // kernel drops further SYNs (the client retransmits after 1 s).
        for (int i = 0; i < 4; ++i) {
          int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
          CHECK(fd >= 0, "filler socket");
          connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
        }
        usleep(50000);
        ctl.Send(0, ntohs(a.sin_port));
        // The client's probe made a channel here (parked for its accept()):
        // the client has sent its SYN, or is about to.
        int64_t deadline = vsocket_rdma_test::NowUs() + 10'000'000;
        while (Registered("bytes") <= 0) {
          CHECK(vsocket_rdma_test::NowUs() < deadline, "no RDMA probe arrived in 10 s");
          usleep(1000);
        }
        // Die while the client waits for its SYN's retransmission (1 s).
        usleep(300000);
        kill(getpid(), SIGKILL);
      },
      [](Ctl& ctl, pid_t) {
        Policy();
        sockaddr_in a = Addr(SelfIp(), static_cast<int>(ctl.Recv(1)));
        int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0, "vsocket_socket");
        CHECK_ERR(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)),
                  ECONNREFUSED);
        ProbeWasWithdrawn();
        vsocket_close(fd);
      });
}

// --- blocking: connect() fails with ECONNREFUSED -----------------------------
int Blocking() {
  return RunPair(RefusingServer, [](Ctl& ctl, pid_t) {
    sockaddr_in a = RefusedPort(ctl);
    int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "vsocket_socket");
    CHECK_ERR(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)),
              ECONNREFUSED);
    ProbeWasWithdrawn();
    vsocket_close(fd);
    ctl.Send(1, 1);
  });
}

// --- nonblocking: ECONNREFUSED now, or EINPROGRESS and then SO_ERROR -------
int Nonblocking() {
  return RunPair(RefusingServer, [](Ctl& ctl, pid_t) {
    sockaddr_in a = RefusedPort(ctl);
    int fd = vsocket_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0, "vsocket_socket");
    errno = 0;
    int rc = vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    int err = errno;
    CHECK(rc == -1 && (err == ECONNREFUSED || err == EINPROGRESS),
          "non-blocking vsocket_connect: rc %d, errno %s; want ECONNREFUSED "
          "(or EINPROGRESS, then SO_ERROR ECONNREFUSED)", rc, strerrorname_np(err));
    if (err == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      CHECK(vsocket_poll(&p, 1, 5000) == 1, "the refused connect did not finish");
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      CHECK(vsocket_getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 &&
                so_error == ECONNREFUSED,
            "SO_ERROR %s", strerrorname_np(so_error));
    }
    ProbeWasWithdrawn();
    vsocket_close(fd);
    ctl.Send(1, 1);
  });
}

// The same scenario per connection (VSOCKET_RDMA_LINKS=0).
template <int (*kRun)()>
int PerConnection() {
  g_links = "0";
  return kRun();
}

constexpr Scenario kScenarios[] = {
    {"server_killed", ServerKilled},
    {"blocking", Blocking},
    {"nonblocking", Nonblocking},
    {"server_killed_per_connection", PerConnection<ServerKilled>},
    {"blocking_per_connection", PerConnection<Blocking>},
    {"nonblocking_per_connection", PerConnection<Nonblocking>}};

}  // namespace

int main(int argc, char** argv) {
  return RunScenarios(argc, argv, kScenarios, /*pair_alarm_s=*/60);
}
