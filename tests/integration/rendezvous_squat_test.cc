// rendezvous_squat: a process of the same user that binds vsocket's
// rendezvous names before vsocket does (docs/PROTOCOL.md section 1), or
// answers as a listener marker in front of a plain TCP server.  Issue 14:
// the connection must fall back to kernel TCP with a named reason, carry
// every byte, never hang, and send nothing to the squatter.
//
// The test process is the squatter (it never calls vsocket); servers and the
// client are forked children.  Names are spelled out here as a squatter
// would spell them, from PROTOCOL.md:
//   vsk1/L/<ip>:<port>                     listener marker (stream)
//   vsk1/c-<ip>-<port>-<client port>/cA    client wait socket (datagram)
//   vsk1/c-<ip>-<port>-<client port>/sA    server wait socket (datagram)
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "clock.h"
#include "loopback.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test::NowMs;
using vsocket_test_support::Loopback;

// Client -> echo server -> client; the datagram flood test sends more.
size_t kBytes = 256 << 10;

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 131) ^ (i >> 9)); }

// The squatter's socket: an abstract Unix socket bound to `name` (a stream
// one listens).  -1 if the name is taken.
int BindAbstract(const std::string& name, int type) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      (type == SOCK_STREAM && listen(fd, 64) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

// A free loopback port (bound, read, released: nothing else binds loopback
// ports on purpose during the test).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// What a child reports through its pipe.
struct Report {
  int ok = 0;                // 1: every byte came back intact / was echoed
  char transport[16] = {};   // at the end of the connection
  char reason[40] = {};
  int64_t elapsed_ms = 0;
  char error[120] = {};
};

void Fill(Report* r, int fd) {
  const char* t = vsocket_transport_name(fd);
  const char* why = vsocket_fallback_reason(fd);
  snprintf(r->transport, sizeof(r->transport), "%s", t ? t : "?");
  snprintf(r->reason, sizeof(r->reason), "%s", why ? why : "?");
}

[[noreturn]] void Finish(int pipe_fd, const Report& r) {
  (void)!write(pipe_fd, &r, sizeof(r));
  _exit(0);
}

#define CHILD_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) {                                               \
      snprintf(r.error, sizeof(r.error), __VA_ARGS__);           \
      Finish(out, r);                                            \
    }                                                            \
  } while (0)

struct Child {
  pid_t pid = -1;
  int pipe_fd = -1;
  // Waits for the report (up to `timeout_ms`; kills the child after it).
  Report Wait(int timeout_ms) {
    Report r;
    pollfd p = {pipe_fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) == 1 && read(pipe_fd, &r, sizeof(r)) == sizeof(r)) {
      waitpid(pid, nullptr, 0);
    } else {
      snprintf(r.error, sizeof(r.error), "no report within %d ms", timeout_ms);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    close(pipe_fd);
    return r;
  }
};

// Forks `body(out)`, which writes one Report to `out`.
template <typename F>
Child Fork(F body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(30);  // never outlive a broken test
    body(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// An echo server, plain libc or through vsocket, made in the child (the
// test process never calls vsocket).  Its port comes first on the pipe.
Child EchoServer(bool plain, int* port) {
  Child c = Fork([&](int out) {
    Report r;
    int lfd = plain ? socket(AF_INET, SOCK_STREAM, 0) : vsocket_socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof(a);
    auto* sa = reinterpret_cast<sockaddr*>(&a);
    if (plain) {
      CHILD_CHECK(bind(lfd, sa, sizeof(a)) == 0 && listen(lfd, 16) == 0 &&
                      getsockname(lfd, sa, &len) == 0,
                  "listen: %s", strerror(errno));
    } else {
      CHILD_CHECK(vsocket_bind(lfd, sa, sizeof(a)) == 0 && vsocket_listen(lfd, 16) == 0 &&
                      vsocket_getsockname(lfd, sa, &len) == 0,
                  "listen: %s", strerror(errno));
    }
    int p = ntohs(a.sin_port);
    (void)!write(out, &p, sizeof(p));
    int fd = plain ? accept(lfd, nullptr, nullptr) : vsocket_accept(lfd, nullptr, nullptr);
    CHILD_CHECK(fd >= 0, "accept: %s", strerror(errno));
    std::vector<char> buf(64 << 10);
    size_t echoed = 0;
    for (;;) {
      ssize_t n = plain ? recv(fd, buf.data(), buf.size(), 0)
                        : vsocket_recv(fd, buf.data(), buf.size(), 0);
      CHILD_CHECK(n >= 0, "server recv: %s", strerror(errno));
      if (n == 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t m = plain ? send(fd, buf.data() + off, n - off, MSG_NOSIGNAL)
                          : vsocket_send(fd, buf.data() + off, n - off, MSG_NOSIGNAL);
        CHILD_CHECK(m > 0, "server send: %s", strerror(errno));
        off += m;
      }
      echoed += static_cast<size_t>(n);
    }
    r.ok = echoed == kBytes;
    if (plain) {
      snprintf(r.transport, sizeof(r.transport), "plain");
    } else {
      Fill(&r, fd);
    }
    plain ? close(fd) : vsocket_close(fd);
    Finish(out, r);
  });
  *port = -1;
  pollfd p = {c.pipe_fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1 || read(c.pipe_fd, port, sizeof(*port)) != sizeof(*port)) {
    ADD_FAILURE() << "the server did not start";
  }
  return c;
}

// A vsocket client (VSOCKET_TRANSPORT=auto) from `client_port` (0: any):
// sends kBytes, half-closes, reads the echo to EOF and compares it.
Child EchoClient(int port, int client_port, int claim_timeout_ms) {
  return Fork([=](int out) {
    Report r;
    setenv("VSOCKET_TRANSPORT", "auto", 1);
    setenv("VSOCKET_CLAIM_TIMEOUT_MS", std::to_string(claim_timeout_ms).c_str(), 1);
    int64_t t0 = NowMs();
    int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    CHILD_CHECK(fd >= 0, "socket");
    if (client_port != 0) {
      int one = 1;
      vsocket_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      sockaddr_in self = Loopback(client_port);
      CHILD_CHECK(vsocket_bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof(self)) == 0,
                  "bind %d: %s", client_port, strerror(errno));
    }
    sockaddr_in dst = Loopback(port);
    CHILD_CHECK(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0,
                "connect: %s", strerror(errno));
    std::vector<uint8_t> data(kBytes), back(kBytes);
    for (size_t i = 0; i < kBytes; ++i) data[i] = Pattern(i);
    size_t sent = 0, got = 0;
    // Send and receive interleaved: the echo must not stall on full buffers.
    while (got < kBytes) {
      if (sent < kBytes) {
        ssize_t m = vsocket_send(fd, data.data() + sent, std::min<size_t>(16 << 10, kBytes - sent),
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
        CHILD_CHECK(m > 0 || errno == EAGAIN, "send: %s", strerror(errno));
        if (m > 0) sent += static_cast<size_t>(m);
        if (sent == kBytes) vsocket_shutdown(fd, SHUT_WR);
      }
      pollfd p = {fd, POLLIN, 0};
      vsocket_poll(&p, 1, sent < kBytes ? 1 : 5000);
      ssize_t n = vsocket_recv(fd, back.data() + got, kBytes - got, MSG_DONTWAIT);
      CHILD_CHECK(n != 0, "EOF after %zu of %zu bytes", got, kBytes);
      CHILD_CHECK(n > 0 || errno == EAGAIN, "recv: %s", strerror(errno));
      if (n > 0) got += static_cast<size_t>(n);
      CHILD_CHECK(NowMs() - t0 < 20000, "stalled: sent %zu, got %zu", sent, got);
    }
    char c;
    pollfd p = {fd, POLLIN, 0};
    vsocket_poll(&p, 1, 5000);
    CHILD_CHECK(vsocket_recv(fd, &c, 1, 0) == 0, "no EOF after the echo");
    r.ok = std::memcmp(data.data(), back.data(), kBytes) == 0;
    r.elapsed_ms = NowMs() - t0;
    Fill(&r, fd);
    vsocket_close(fd);
    Finish(out, r);
  });
}

std::string Key(int port, int client_port) {
  return "c-127.0.0.1-" + std::to_string(port) + "-" + std::to_string(client_port);
}

// Nothing but connection attempts reached the squatter: every connection
// queued on its stream socket carries no byte.
void ExpectNoBytesTo(int squat_fd, int* probes) {
  *probes = 0;
  for (;;) {
    int c = accept4(squat_fd, nullptr, nullptr, SOCK_NONBLOCK);
    if (c < 0) break;
    ++*probes;
    char b;
    ssize_t n = recv(c, &b, 1, 0);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == EAGAIN)) << "the squatter got data";
    close(c);
  }
}

TEST(RendezvousSquat, AForgedListenerMarkerInFrontOfAPlainServerFallsBackAtTheClaimTimeout) {
  int port = 0;
  Child server = EchoServer(/*plain=*/true, &port);
  int marker = BindAbstract("vsk1/L/127.0.0.1:" + std::to_string(port), SOCK_STREAM);
  ASSERT_GE(marker, 0) << "squat the marker";
  Child client = EchoClient(port, 0, /*claim_timeout_ms=*/300);
  Report c = client.Wait(25000);
  Report s = server.Wait(5000);
  EXPECT_STREQ(c.error, "");
  EXPECT_STREQ(s.error, "");
  EXPECT_TRUE(c.ok) << "echo intact";
  EXPECT_TRUE(s.ok) << "server echoed every byte";
  EXPECT_STREQ(c.transport, "tcp");
  EXPECT_STREQ(c.reason, "claim_timeout");
  // The claim timeout (300 ms) and the echo.  A client asleep in poll()
  // when its offer moved to TCP used to sleep to its poll timeout (5 s):
  // the poll waited on the old wait socket only (ShmTransport::
  // OnLivenessEvent now wakes it when TCP becomes readable).
  EXPECT_LT(c.elapsed_ms, 2000);
  int probes = 0;
  ExpectNoBytesTo(marker, &probes);
  EXPECT_GE(probes, 1) << "the client never probed the forged marker";
  close(marker);
}

// Squats `role` ("cA": the client's wait socket, "sA": the server's) of the
// next connection, then echoes over it: both reports, every byte intact,
// no datagram to the squatter.
struct SquatOutcome {
  Report client, server;
};
SquatOutcome SquatAndEcho(const char* role) {
  SquatOutcome o;
  int port = 0;
  Child server = EchoServer(/*plain=*/false, &port);
  int client_port = FreePort();
  int squat = BindAbstract("vsk1/" + Key(port, client_port) + "/" + role, SOCK_DGRAM);
  EXPECT_GE(squat, 0);
  Child client = EchoClient(port, client_port, 3000);
  o.client = client.Wait(25000);
  o.server = server.Wait(5000);
  EXPECT_STREQ(o.client.error, "");
  EXPECT_STREQ(o.server.error, "");
  EXPECT_TRUE(o.client.ok && o.server.ok);
  char b;
  EXPECT_LT(recv(squat, &b, 1, MSG_DONTWAIT), 0) << "the squatter got a datagram";
  if (squat >= 0) close(squat);
  return o;
}

TEST(RendezvousSquat, SquattedClientNamesSendTheConnectionToTcp) {
  SquatOutcome o = SquatAndEcho("cA");
  EXPECT_STREQ(o.client.transport, "tcp");
  EXPECT_STREQ(o.client.reason, "rendezvous_name_in_use");
  EXPECT_STREQ(o.server.transport, "tcp");
  EXPECT_STREQ(o.server.reason, "peer_not_vsocket");
}

TEST(RendezvousSquat, SquattedServerNamesSendTheConnectionToTcp) {
  SquatOutcome o = SquatAndEcho("sA");
  // The server cannot bind its names, declines the claim, and the client
  // learns it at once (no claim timeout).
  EXPECT_STREQ(o.server.transport, "tcp");
  EXPECT_STREQ(o.server.reason, "rendezvous_name_in_use");
  EXPECT_STREQ(o.client.transport, "tcp");
  EXPECT_STREQ(o.client.reason, "claim_declined");
  EXPECT_LT(o.client.elapsed_ms, 2000);
}

// Datagrams from a stranger of the same user into a connection's doorbell
// sockets (PROTOCOL.md section 3) while 64 MiB are echoed: junk of 1 to 64
// bytes, or, with `declines`, the one byte 'D' of a server's decline.
// Returns the client's and the server's reports; prints how many
// datagrams got in.
struct FloodOutcome {
  Report client, server;
  int delivered = 0;
};
FloodOutcome FloodDoorbells(const std::vector<std::string>& names,
                            bool declines = false) {
  kBytes = 64 << 20;
  int port = 0;
  Child server = EchoServer(/*plain=*/false, &port);
  int client_port = FreePort();
  Child client = EchoClient(port, client_port, 3000);
  int stranger = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const std::string key = "vsk1/" + Key(port, client_port) + "/";
  FloodOutcome o;
  char junk[64];
  std::memset(junk, 0xa5, sizeof(junk));
  pollfd p = {client.pipe_fd, POLLIN, 0};
  int64_t start = NowMs();
  while (stranger >= 0 && poll(&p, 1, 0) == 0 && NowMs() - start < 25000) {
    for (const std::string& n : names) {
      std::string name = key + n;
      sockaddr_un a = {};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path + 1, name.data(), name.size());
      socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      size_t size = declines ? 1 : 1 + NowMs() % sizeof(junk);
      if (sendto(stranger, declines ? "D" : junk, size, 0,
                 reinterpret_cast<sockaddr*>(&a), len) >= 0)
        ++o.delivered;
    }
  }
  o.client = client.Wait(25000);
  o.server = server.Wait(5000);
  if (stranger >= 0) close(stranger);
  kBytes = 256 << 10;
  std::printf("%d datagrams delivered; client %s %s, server %s %s\n", o.delivered,
              o.client.transport, o.client.reason, o.server.transport, o.server.reason);
  return o;
}

// Into both wait sockets: they cost wake-ups (and, while a stranger keeps a
// wait socket's queue full, a blocked writer's filler does not fit, so its
// descriptor stays writable and it looks again rather than sleeps),
// nothing more; the connection stays on shared memory, every byte intact.
TEST(RendezvousSquat, StrangersDatagramsIntoTheDoorbellsChangeNothing) {
  FloodOutcome o = FloodDoorbells({"cA", "sA"});
  EXPECT_STREQ(o.client.error, "");
  EXPECT_STREQ(o.server.error, "");
  EXPECT_TRUE(o.client.ok && o.server.ok) << "echo intact";
  EXPECT_STREQ(o.client.transport, "shm") << o.client.reason;
  EXPECT_STREQ(o.server.transport, "shm") << o.server.reason;
  EXPECT_GT(o.delivered, 0) << "the flood never reached the connection";
}

// Declines into the client's wait socket: before the claim a 'D' there is
// the server's decline (Doorbell::DeclineOffer, sent from an unbound socket,
// so it cannot be told from a stranger's of the same user), and the
// connection moves to TCP, named claim_declined; after the claim it costs a
// wake-up.  Either way every byte arrives.
TEST(RendezvousSquat, StrangersDeclinesIntoTheClientsWaitSocketAtMostMoveTheOffer) {
  FloodOutcome o = FloodDoorbells({"cA"}, /*declines=*/true);
  EXPECT_STREQ(o.client.error, "");
  EXPECT_STREQ(o.server.error, "");
  EXPECT_TRUE(o.client.ok && o.server.ok) << "echo intact";
  if (std::string(o.client.transport) == "tcp") {
    EXPECT_STREQ(o.client.reason, "claim_declined");
  } else {
    EXPECT_STREQ(o.client.transport, "shm");
  }
}

}  // namespace
