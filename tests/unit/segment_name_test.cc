// A shared-memory connection's segment file keeps its name while the
// connection lives (it is how either side reaches the file again to hand
// it across exec), and loses it once both sides are done: closed, or gone
// with exit() (docs/PROTOCOL.md, section 2, "The name's lifetime").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "vsocket/vsocket.h"

namespace {

uint16_t PortOf(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  int rc = peer ? vsocket_getpeername(fd, sa, &len) : vsocket_getsockname(fd, sa, &len);
  return rc == 0 ? ntohs(a.sin_port) : 0;
}

// One connection between two vsocket sockets of this process, over
// loopback; its segment file's path.
struct Pair {
  int listener = -1, client = -1, server = -1;
  std::string path;
};

bool MakePair(Pair* p) {
  p->listener = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  if (vsocket_bind(p->listener, sa, sizeof a) != 0 || vsocket_listen(p->listener, 4) != 0)
    return false;
  a.sin_port = htons(PortOf(p->listener, false));
  p->client = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  if (vsocket_connect(p->client, sa, sizeof a) != 0) return false;
  p->server = vsocket_accept(p->listener, nullptr, nullptr);
  if (p->server < 0) return false;
  char byte = 'x';
  if (vsocket_send(p->client, &byte, 1, 0) != 1 || vsocket_recv(p->server, &byte, 1, 0) != 1 ||
      vsocket_send(p->server, &byte, 1, 0) != 1 || vsocket_recv(p->client, &byte, 1, 0) != 1)
    return false;
  p->path = "/dev/shm/vsocket-" + std::to_string(::geteuid()) + "/c-127.0.0.1-" +
            std::to_string(PortOf(p->server, false)) + "-" +
            std::to_string(PortOf(p->server, true));
  return true;
}

bool Exists(const std::string& path) {
  struct stat st;
  // lstat: with pools (VSOCKET_SHM_POOL=1) the name is a symlink whose
  // text, <pool>#<slice>#<generation>, is no path.
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(SegmentName, StaysUntilTheSecondSideCloses) {
  Pair p;
  ASSERT_TRUE(MakePair(&p));
  ASSERT_STREQ(vsocket_transport_name(p.client), "shm");
  EXPECT_TRUE(Exists(p.path)) << p.path;
  vsocket_close(p.client);
  EXPECT_TRUE(Exists(p.path)) << "the server may still exec with the connection";
  vsocket_close(p.server);
  EXPECT_FALSE(Exists(p.path)) << p.path;
  vsocket_close(p.listener);
}

// Two processes that leave with exit() and never close: the last to go
// unlinks the name (here both ends are one process, so its two sides).
TEST(SegmentName, GoesWhenBothSidesExitWithoutClosing) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    Pair p;
    bool ok = MakePair(&p) && std::strcmp(vsocket_transport_name(p.client), "shm") == 0 &&
              Exists(p.path);
    std::string report = (ok ? "ok " : "no ") + p.path;
    ssize_t n = ::write(pipe_fds[1], report.data(), report.size());
    (void)n;
    std::exit(0);  // the connection still open
  }
  ::close(pipe_fds[1]);
  char buf[512] = {};
  ssize_t n = ::read(pipe_fds[0], buf, sizeof buf - 1);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_GT(n, 3);
  std::string report(buf, static_cast<size_t>(n));
  ASSERT_EQ(report.substr(0, 3), "ok ") << report;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(Exists(report.substr(3))) << "left behind by a process that exited";
}

}  // namespace
