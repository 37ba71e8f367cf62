// backlog_probe (rdma_backend/backlog_probe.h) against the kernel's own
// sockets on loopback, no RDMA device needed: a connection the listener
// has not accepted is found (the case the RDMA acceptor keeps a parked
// channel for), it stays found once accepted and once its client closed
// (CLOSE_WAIT, still acceptable), nothing is found for a port without
// connections, and the listening socket itself is never reported.
#include "rdma_backend/backlog_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace vsocket::rdma {
namespace {

// A loopback listener on an ephemeral port; its port in host order.
int ListenLoopback(uint16_t* port) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(l, 8) != 0) {
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return l;
}

// A client socket connected to 127.0.0.1:`port` (the listener does not
// accept it); -1 on failure.
int ConnectLoopback(uint16_t port) {
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  return c;
}

// "127.0.0.1:<client port>" of a connected client socket.
std::string ClientKey(int c) {
  sockaddr_in a = {};
  socklen_t len = sizeof(a);
  getsockname(c, reinterpret_cast<sockaddr*>(&a), &len);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

TEST(BacklogProbe, FindsConnectionsWaitingForAcceptAndNotTheListener) {
  uint16_t port = 0;
  int l = ListenLoopback(&port);
  ASSERT_GE(l, 0);
  std::set<std::string> peers;
  ASSERT_TRUE(TcpPeersOfPort(port, &peers)) << strerror(errno);
  EXPECT_TRUE(peers.empty()) << "the listener alone is no connection";

  int c = ConnectLoopback(port);
  ASSERT_GE(c, 0) << strerror(errno);
  const std::string key = ClientKey(c);

  peers.clear();
  ASSERT_TRUE(TcpPeersOfPort(port, &peers));
  EXPECT_EQ(peers, std::set<std::string>{key}) << "in the backlog, not accepted";

  int s = accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0);
  peers.clear();
  ASSERT_TRUE(TcpPeersOfPort(port, &peers));
  EXPECT_EQ(peers.count(key), 1u) << "accepted";

  close(c);  // the server end goes to CLOSE_WAIT
  usleep(20000);
  peers.clear();
  ASSERT_TRUE(TcpPeersOfPort(port, &peers));
  EXPECT_EQ(peers.count(key), 1u) << "closed by its client, not yet by us";

  close(s);
  close(l);
  peers.clear();
  ASSERT_TRUE(TcpPeersOfPort(port, &peers));
  EXPECT_TRUE(peers.empty());
}

TEST(BacklogProbe, FindsIpv4MappedConnectionsOfADualStackListener) {
  int l = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  sockaddr_in6 a6 = {};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_any;
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&a6), sizeof(a6)), 0);
  ASSERT_EQ(listen(l, 8), 0);
  socklen_t len = sizeof(a6);
  getsockname(l, reinterpret_cast<sockaddr*>(&a6), &len);
  uint16_t port = ntohs(a6.sin6_port);

  int c = ConnectLoopback(port);
  ASSERT_GE(c, 0) << strerror(errno);
  std::set<std::string> peers;
  ASSERT_TRUE(TcpPeersOfPort(port, &peers));
  EXPECT_EQ(peers.count(ClientKey(c)), 1u) << "written as IPv4";
  close(c);
  close(l);
}

}  // namespace
}  // namespace vsocket::rdma
