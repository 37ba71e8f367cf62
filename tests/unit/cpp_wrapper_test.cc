// The C++ wrapper: RAII ownership and a loopback connection inside one
// process, which both ends being vsocket puts on shared memory.
#include "vsocket/vsocket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

// A connected loopback pair (client, server) made through the wrapper.
void ConnectPair(vsocket::Socket* client, vsocket::Socket* server) {
  vsocket::Socket listener = vsocket::Socket::Open(AF_INET, SOCK_STREAM);
  ASSERT_TRUE(listener);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(listener.Bind(addr), 0);
  ASSERT_EQ(listener.Listen(), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(vsocket_getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *client = vsocket::Socket::Open(AF_INET, SOCK_STREAM);
  ASSERT_EQ(client->Connect(addr), 0);
  *server = listener.Accept();
  ASSERT_TRUE(*server);
}

TEST(CppWrapperTest, LoopbackConnectionUsesSharedMemory) {
  vsocket::Socket client, server;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&client, &server));
  EXPECT_STREQ(client.TransportName(), "shm");
  EXPECT_STREQ(server.TransportName(), "shm");
  EXPECT_STREQ(client.FallbackReason(), "");

  const std::string message = "hello over shared memory";
  ASSERT_EQ(client.SendAll(message.data(), message.size()),
            static_cast<ssize_t>(message.size()));
  char buf[64] = {};
  ASSERT_EQ(server.Recv(buf, sizeof(buf), MSG_WAITALL == 0 ? 0 : 0),
            static_cast<ssize_t>(message.size()));
  EXPECT_EQ(std::string(buf, message.size()), message);

  ASSERT_EQ(client.Shutdown(SHUT_WR), 0);
  EXPECT_EQ(server.Recv(buf, sizeof(buf)), 0);  // EOF after half-close
  ASSERT_EQ(server.SendAll("ok", 2), 2);
  EXPECT_EQ(client.Recv(buf, sizeof(buf)), 2);
}

TEST(CppWrapperTest, RegisteredSendAndInPlaceReceive) {
  vsocket::Socket client, server;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&client, &server));

  char grads[4096];
  for (size_t i = 0; i < sizeof(grads); ++i) grads[i] = static_cast<char>(i * 7);
  vsocket::Region region = vsocket::Region::Register(grads, sizeof(grads));
  ASSERT_TRUE(region);
  ASSERT_EQ(client.SendRegistered(region, 100, 1000), 1000);
  EXPECT_EQ(client.SendRegistered(region, 4000, 200), -1);  // past the end
  EXPECT_EQ(errno, EINVAL);

  size_t got = 0;
  while (got < 1000) {
    const void* view = nullptr;
    ssize_t n = server.RecvInPlace(&view, 1000 - got);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::memcmp(view, grads + 100 + got, static_cast<size_t>(n)), 0);
    ASSERT_EQ(server.ReleaseInPlace(static_cast<size_t>(n)), 0);
    got += static_cast<size_t>(n);
  }
  vsocket::Region moved = std::move(region);
  EXPECT_FALSE(region);
  EXPECT_EQ(moved.Reset(), 0);
  EXPECT_FALSE(moved);
}

TEST(CppWrapperTest, MoveTransfersOwnership) {
  vsocket::Socket a = vsocket::Socket::Open(AF_INET, SOCK_STREAM);
  int fd = a.fd();
  ASSERT_GE(fd, 0);
  vsocket::Socket b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.Close(), 0);
  EXPECT_FALSE(b);
  EXPECT_EQ(vsocket_transport_name(fd), nullptr);
}

}  // namespace
