// defer_accept: a listener with TCP_DEFER_ACCEPT (nginx's `listen ...
// deferred`).  The kernel holds a connection back from accept() until its
// first data arrive; a shared-memory client sends its data through the ring,
// so before vsocket kept the option from the kernel every such connection
// waited for the client's claim timeout (3 s) and then ran on TCP.  Now the
// echo comes back at once, over shared memory, and getsockopt reports what
// the kernel would.  Set before and after listen(), as programs do (nginx
// sets it after).
#include <arpa/inet.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "clock.h"
#include "loopback.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test::NowMs;
using vsocket_test_support::Loopback;

constexpr int kDeferSeconds = 5;

// What the kernel's getsockopt gives back for kDeferSeconds (it rounds to
// SYN-ACK retransmissions).
int KernelRounded() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int v = kDeferSeconds;
  setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v));
  socklen_t len = sizeof(v);
  v = -1;
  getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &len);
  close(fd);
  return v;
}

int SetDefer(int fd) {
  int v = kDeferSeconds;
  return vsocket_setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v));
}

// Server child: listener with the option set before or after listen();
// reports the option as getsockopt sees it, accepts one connection, echoes
// 5 bytes, and exits 0 if that connection ran on shared memory.
void RunServer(bool set_after_listen, int port_pipe) {
  setenv("VSOCKET_TRANSPORT", "auto", 1);
  int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (!set_after_listen && SetDefer(lfd) != 0) _exit(10);
  if (vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      vsocket_listen(lfd, 16) != 0 ||
      vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    _exit(11);
  if (set_after_listen && SetDefer(lfd) != 0) _exit(12);
  int reported = -1;
  len = sizeof(reported);
  if (vsocket_getsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &reported, &len) != 0) _exit(13);
  int msg[2] = {ntohs(a.sin_port), reported};
  if (write(port_pipe, msg, sizeof(msg)) != sizeof(msg)) _exit(14);
  int fd = vsocket_accept(lfd, nullptr, nullptr);
  if (fd < 0) _exit(15);
  char buf[5];
  if (vsocket_recv(fd, buf, sizeof(buf), MSG_WAITALL) != 5) _exit(16);
  if (vsocket_send(fd, buf, sizeof(buf), MSG_NOSIGNAL) != 5) _exit(17);
  const char* t = vsocket_transport_name(fd);
  bool shm = t && std::string(t) == "shm";
  vsocket_recv(fd, buf, 1, 0);  // the client's close
  _exit(shm ? 0 : 18);
}

void ExpectPromptShmEcho(bool set_after_listen) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    alarm(30);
    RunServer(set_after_listen, pipefd[1]);
  }
  close(pipefd[1]);
  int msg[2] = {-1, -1};
  ASSERT_EQ(read(pipefd[0], msg, sizeof(msg)), static_cast<ssize_t>(sizeof(msg)));
  close(pipefd[0]);
  EXPECT_EQ(msg[1], KernelRounded()) << "getsockopt(TCP_DEFER_ACCEPT) on the listener";

  setenv("VSOCKET_TRANSPORT", "auto", 1);
  int64_t t0 = NowMs();
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in dst = Loopback(msg[0]);
  ASSERT_EQ(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)), 0);
  ASSERT_EQ(vsocket_send(fd, "hello", 5, MSG_NOSIGNAL), 5);
  char back[5];
  ASSERT_EQ(vsocket_recv(fd, back, sizeof(back), MSG_WAITALL), 5);
  int64_t ms = NowMs() - t0;
  EXPECT_EQ(std::memcmp(back, "hello", 5), 0);
  EXPECT_STREQ(vsocket_transport_name(fd), "shm") << vsocket_fallback_reason(fd);
  // Kernel TCP answers in well under a millisecond here; the claim timeout
  // (what a held-back connection waited for) is 3 s.
  EXPECT_LT(ms, 1000) << "the echo took " << ms << " ms";
  vsocket_close(fd);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "server exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

TEST(DeferAccept, SetBeforeListenShmClientsAreAcceptedAtOnce) { ExpectPromptShmEcho(false); }

TEST(DeferAccept, SetAfterListenShmClientsAreAcceptedAtOnce) { ExpectPromptShmEcho(true); }

}  // namespace
