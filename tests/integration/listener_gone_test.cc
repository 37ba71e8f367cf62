// listener_gone: a vsocket listener process dies while a shared-memory
// client's offer is still unclaimed, and no RST ever reaches the client.
//
// The kernel answers a segment for a connection it no longer knows with an
// RST, but it sends nothing by itself: a client whose handshake ACK the
// listener had not yet turned into a connection in its accept queue (here
// forced with TCP_DEFER_ACCEPT, set on the kernel socket behind vsocket's
// back, which keeps the connection half-open until data arrive) hears
// nothing when the listener dies, and a shared-memory client sends nothing
// on TCP.  The kill loop saw this about once in 7,500 kills: the client
// learnt of the death only at its claim timeout (3 s).  Now the client's
// watcher looks every 100 ms, while the offer is unclaimed, whether the
// listener's process (the marker's SO_PEERCRED pid) still lives, and
// revokes the offer when it does not: the bytes go to TCP, which draws the
// RST.  The dead server is left a zombie (not yet reaped) on purpose: a
// zombie is gone too.
#include <errno.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "clock.h"
#include "loopback.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test_support::Loopback;
using vsocket_test::NowMs;

TEST(ListenerGone, UnclaimedClientLearnsOfTheListenersDeathWithinASecond) {
  setenv("VSOCKET_TRANSPORT", "auto", 1);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t server = fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    close(ready[0]);
    int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof(a);
    if (vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        vsocket_listen(lfd, 16) != 0 ||
        vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      _exit(10);
    // Behind vsocket's back (the plain libc call): the kernel keeps the
    // client's connection half-open until data arrive on TCP.
    int defer = 30;
    if (setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) != 0) _exit(11);
    int port = ntohs(a.sin_port);
    if (write(ready[1], &port, sizeof(port)) != sizeof(port)) _exit(12);
    for (;;) pause();  // never accepts
  }
  close(ready[1]);
  int port = 0;
  ASSERT_EQ(read(ready[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(ready[0]);

  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in dst = Loopback(port);
  ASSERT_EQ(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)), 0);
  ASSERT_STREQ(vsocket_transport_name(fd), "shm") << vsocket_fallback_reason(fd);
  ASSERT_EQ(vsocket_send(fd, "into the ring", 13, MSG_NOSIGNAL), 13);
  usleep(20 * 1000);  // the handshake is done; the offer waits for a claim

  ASSERT_EQ(kill(server, SIGKILL), 0);
  int64_t t0 = NowMs();
  pollfd p = {fd, POLLIN, 0};
  int r = vsocket_poll(&p, 1, 5000);
  int64_t ms = NowMs() - t0;
  char c;
  errno = 0;
  ssize_t n = r == 1 ? vsocket_recv(fd, &c, 1, MSG_DONTWAIT) : -2;
  int err = errno;
  waitpid(server, nullptr, 0);  // reaped only now: a zombie until here
  EXPECT_EQ(r, 1) << "no event 5 s after the listener's death";
  EXPECT_TRUE(n == 0 || (n == -1 && (err == ECONNRESET || err == EPIPE)))
      << "recv " << n << " errno " << strerror(err);
  EXPECT_LT(ms, 1000) << "the client learnt of the death after " << ms << " ms";
  vsocket_close(fd);
}

}  // namespace
