// accept() hands the peer's address to vsocket as well as to the caller,
// and a listener bound to one address gives its connections their local
// one (vsocket/connection_endpoints.h).  What the caller sees must stay
// the kernel's: the same bytes, the same length, truncation included, and
// getsockname/getpeername on the accepted socket must agree with it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tools/live_page_reader.h"
#include "vsocket/live_stats.h"
#include "vsocket/vsocket.h"

namespace {

// A listener on `ip`:0 made with `listen_api` (vsocket or kernel); its port.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
};

Listener ListenOn(const char* ip, bool through_vsocket) {
  Listener l;
  l.fd = through_vsocket ? vsocket_socket(AF_INET, SOCK_STREAM, 0)
                         : ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(l.fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.sin_addr);
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  EXPECT_EQ(through_vsocket ? vsocket_bind(l.fd, sa, sizeof a) : ::bind(l.fd, sa, sizeof a), 0);
  EXPECT_EQ(through_vsocket ? vsocket_listen(l.fd, 8) : ::listen(l.fd, 8), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(::getsockname(l.fd, sa, &len), 0);
  l.port = ntohs(a.sin_port);
  return l;
}

// A plain kernel client connected to 127.0.0.1:port; its own address.
int ConnectKernelClient(uint16_t port, sockaddr_in* self) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof *self;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(self), &len), 0);
  return fd;
}

// What this process's live page says of its connection on `fd`.
vsocket_stat::Connection LiveEntry(int fd) {
  vsocket_stat::Process p;
  std::string why;
  bool stale = false;
  std::string path = vsocket::LiveStatsDirectory() + "/stat-" + std::to_string(getpid());
  EXPECT_TRUE(vsocket_stat::ReadPage(path, &p, &why, &stale)) << why;
  for (const auto& c : p.connections)
    if (c.fd == fd) return c;
  ADD_FAILURE() << "no live entry for fd " << fd;
  return {};
}

class AcceptAddress : public testing::TestWithParam<const char*> {};

TEST_P(AcceptAddress, FullBufferGetsThePeerAndTheNamesAgree) {
  Listener l = ListenOn(GetParam(), /*through_vsocket=*/true);
  sockaddr_in client_self{};
  int c = ConnectKernelClient(l.port, &client_self);
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  int s = vsocket_accept(l.fd, reinterpret_cast<sockaddr*>(&peer), &len);
  ASSERT_GE(s, 0);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(peer.sin_port, client_self.sin_port);
  EXPECT_EQ(peer.sin_addr.s_addr, client_self.sin_addr.s_addr);
  sockaddr_in named{};
  socklen_t named_len = sizeof named;
  ASSERT_EQ(vsocket_getpeername(s, reinterpret_cast<sockaddr*>(&named), &named_len), 0);
  EXPECT_EQ(named.sin_port, client_self.sin_port);
  named_len = sizeof named;
  ASSERT_EQ(vsocket_getsockname(s, reinterpret_cast<sockaddr*>(&named), &named_len), 0);
  EXPECT_EQ(ntohs(named.sin_port), l.port);
  EXPECT_EQ(named.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  // The live page names both ends as the kernel does.
  vsocket_stat::Connection live = LiveEntry(s);
  EXPECT_EQ(live.role, "server");
  EXPECT_EQ(live.local, "127.0.0.1:" + std::to_string(l.port));
  EXPECT_EQ(live.peer, "127.0.0.1:" + std::to_string(ntohs(client_self.sin_port)));
  // The connection works (it is kernel TCP: the client is a plain one).
  ASSERT_EQ(::send(c, "x", 1, 0), 1);
  char b = 0;
  EXPECT_EQ(vsocket_recv(s, &b, 1, 0), 1);
  EXPECT_EQ(b, 'x');
  EXPECT_STREQ(vsocket_transport_name(s), "tcp");
  vsocket_close(s);
  ::close(c);
  vsocket_close(l.fd);
}

TEST_P(AcceptAddress, NoBufferIsFine) {
  Listener l = ListenOn(GetParam(), true);
  sockaddr_in client_self{};
  int c = ConnectKernelClient(l.port, &client_self);
  int s = vsocket_accept(l.fd, nullptr, nullptr);
  ASSERT_GE(s, 0);
  sockaddr_in named{};
  socklen_t named_len = sizeof named;
  ASSERT_EQ(vsocket_getpeername(s, reinterpret_cast<sockaddr*>(&named), &named_len), 0);
  EXPECT_EQ(named.sin_port, client_self.sin_port);
  vsocket_close(s);
  ::close(c);
  vsocket_close(l.fd);
}

TEST_P(AcceptAddress, ShortBufferIsCutAsTheKernelCutsIt) {
  // The kernel copies what fits and reports the full length.
  sockaddr_in got[2];
  socklen_t got_len[2];
  uint16_t client_port[2];
  for (int through_vsocket = 0; through_vsocket < 2; ++through_vsocket) {
    Listener l = ListenOn(GetParam(), through_vsocket);
    sockaddr_in client_self{};
    int c = ConnectKernelClient(l.port, &client_self);
    client_port[through_vsocket] = client_self.sin_port;
    std::memset(&got[through_vsocket], 0xab, sizeof got[0]);
    got_len[through_vsocket] = 4;  // family and port only
    auto* sa = reinterpret_cast<sockaddr*>(&got[through_vsocket]);
    int s = through_vsocket ? vsocket_accept(l.fd, sa, &got_len[through_vsocket])
                            : ::accept(l.fd, sa, &got_len[through_vsocket]);
    ASSERT_GE(s, 0);
    // vsocket did not take the cut address for the whole one.
    if (through_vsocket) {
      sockaddr_in named{};
      socklen_t named_len = sizeof named;
      ASSERT_EQ(vsocket_getpeername(s, reinterpret_cast<sockaddr*>(&named), &named_len), 0);
      EXPECT_EQ(named.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
      EXPECT_EQ(LiveEntry(s).peer,
                "127.0.0.1:" + std::to_string(ntohs(client_self.sin_port)));
      vsocket_close(s);
      vsocket_close(l.fd);
    } else {
      ::close(s);
      ::close(l.fd);
    }
    ::close(c);
  }
  EXPECT_EQ(got_len[1], got_len[0]);
  EXPECT_EQ(got_len[1], sizeof(sockaddr_in));
  EXPECT_EQ(got[1].sin_family, got[0].sin_family);
  EXPECT_EQ(got[1].sin_port, client_port[1]);
  EXPECT_EQ(got[0].sin_port, client_port[0]);
  // Beyond the 4 bytes, both left the buffer alone.
  EXPECT_EQ(std::memcmp(&got[1].sin_addr, &got[0].sin_addr, sizeof got[0].sin_addr), 0);
}

// A listener on one address and one on the wildcard: the first lends its
// address to its connections, the second's are named by the kernel.
INSTANTIATE_TEST_SUITE_P(Listeners, AcceptAddress, testing::Values("127.0.0.1", "0.0.0.0"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param[0] == '0' ? "Wildcard" : "Loopback");
                         });

}  // namespace
