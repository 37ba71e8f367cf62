// Doorbell: wake-ups make the wait socket readable; filler makes it
// unwritable until the peer drains its sink; a vanished peer is reported.
#include "fifo_bridge/doorbell.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

namespace vsocket::fifo {
namespace {

short Events(int fd) {
  struct pollfd pfd = {fd, POLLIN | POLLOUT, 0};
  EXPECT_GE(::poll(&pfd, 1, 0), 0);
  return pfd.revents;
}

std::string UniqueKey(const char* name) {
  return std::string("test-") + name + "-" + std::to_string(::getpid());
}

TEST(DoorbellTest, RingPeerMakesPeerReadable) {
  std::string key = UniqueKey("ring");
  Doorbell client, server;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  ASSERT_EQ(server.Open(key, 's', 'c'), 0);
  EXPECT_FALSE(Events(server.wait_fd()) & POLLIN);
  EXPECT_EQ(client.RingPeer(), 0);
  EXPECT_TRUE(Events(server.wait_fd()) & POLLIN);
  server.DrainWakeups();
  EXPECT_FALSE(Events(server.wait_fd()) & POLLIN);
  EXPECT_EQ(server.RingSelf(), 0);
  EXPECT_TRUE(Events(server.wait_fd()) & POLLIN);
}

TEST(DoorbellTest, FillerClearsPollOutUntilPeerDrains) {
  std::string key = UniqueKey("fill");
  Doorbell client, server;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  ASSERT_EQ(server.Open(key, 's', 'c'), 0);
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
  ASSERT_EQ(client.FillSendBuffer(), 0);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLOUT);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLIN);  // filler is not a wake-up
  server.DrainSink();
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
}

TEST(DoorbellTest, NameInUseIsReported) {
  std::string key = UniqueKey("dup");
  Doorbell first, second;
  ASSERT_EQ(first.Open(key, 'c', 's'), 0);
  EXPECT_EQ(second.Open(key, 'c', 's'), -EADDRINUSE);
}

TEST(DoorbellTest, VanishedPeerIsReported) {
  std::string key = UniqueKey("gone");
  Doorbell client;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  EXPECT_EQ(client.RingPeer(), -ECONNREFUSED);
  EXPECT_LT(client.FillSendBuffer(), 0);
}

}  // namespace
}  // namespace vsocket::fifo
