// Doorbell: wake-ups make the wait socket readable; filler makes it
// unwritable until the peer drains its wait socket; a vanished peer is
// reported; a decline is told from the rest.
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

// Both sides' doorbells of one connection, named after `name`.
void OpenBoth(const char* name, Doorbell* client, Doorbell* server) {
  std::string key = UniqueKey(name);
  ASSERT_EQ(client->Open(key, 'c', 's'), 0);
  ASSERT_EQ(server->Open(key, 's', 'c'), 0);
}

TEST(DoorbellTest, RingPeerMakesPeerReadable) {
  Doorbell client, server;
  OpenBoth("ring", &client, &server);
  EXPECT_FALSE(Events(server.wait_fd()) & POLLIN);
  EXPECT_EQ(client.RingPeer(), 0);
  EXPECT_TRUE(Events(server.wait_fd()) & POLLIN);
  server.DrainWakeups();
  EXPECT_FALSE(Events(server.wait_fd()) & POLLIN);
  EXPECT_EQ(server.RingSelf(), 0);
  EXPECT_TRUE(Events(server.wait_fd()) & POLLIN);
}

TEST(DoorbellTest, FillerClearsPollOutUntilPeerDrains) {
  Doorbell client, server;
  OpenBoth("fill", &client, &server);
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
  ASSERT_EQ(client.FillSendBuffer(), 0);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLOUT);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLIN);  // filler is not a wake-up
  // The filler waits in the peer's wait socket (which a blocked writer's
  // consumer has data in anyway) until the peer drains it.
  EXPECT_TRUE(Events(server.wait_fd()) & POLLIN);
  server.DrainWakeups();
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
  ASSERT_EQ(client.FillSendBuffer(), 0);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLOUT);
  server.DrainWakeupsChecked();
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
}

TEST(DoorbellTest, PendingWakeUpsLeaveTheWaitSocketWritable) {
  // Wake-ups leave from the process's wake socket (or a socket of their
  // own), never from the wait socket: however many the peer leaves
  // unread, ours stays writable.
  Doorbell client, server;
  OpenBoth("pending", &client, &server);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(client.RingPeer(), 0);
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(client.RingSelf(), 0);
  EXPECT_TRUE(Events(client.wait_fd()) & POLLOUT);
}

TEST(DoorbellTest, ADeclineIsTheOneDatagramThatDrainingReports) {
  Doorbell client, server;
  OpenBoth("decline", &client, &server);
  std::string key = UniqueKey("decline");
  // Wake-ups and filler are not declines.
  ASSERT_EQ(client.RingSelf(), 0);
  ASSERT_EQ(server.FillSendBuffer(), 0);
  Doorbell::Drained drained = client.DrainWakeups();
  EXPECT_GE(drained.datagrams, 2);
  EXPECT_FALSE(drained.declined);
  // The server's decline makes the client's wait socket readable.
  EXPECT_EQ(Doorbell::DeclineOffer(key), 0);
  EXPECT_TRUE(Events(client.wait_fd()) & POLLIN);
  EXPECT_FALSE(Events(server.wait_fd()) & POLLIN);  // only the client's
  ASSERT_EQ(client.RingSelf(), 0);
  drained = client.DrainWakeupsChecked();
  EXPECT_EQ(drained.datagrams, 2);
  EXPECT_TRUE(drained.declined);
  EXPECT_FALSE(Events(client.wait_fd()) & POLLIN);
  client.Close();
  EXPECT_EQ(Doorbell::DeclineOffer(key), -ECONNREFUSED);  // no such client
}

TEST(DoorbellTest, ClientWaitSocketBoundTellsWhetherAClientOffered) {
  // The server's first question in a claim: no client socket, no offer.
  std::string key = UniqueKey("offered");
  EXPECT_FALSE(Doorbell::ClientWaitSocketBound(key));
  Doorbell client;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  EXPECT_TRUE(Doorbell::ClientWaitSocketBound(key));
  // Asking sends nothing: the client's socket stays empty.
  EXPECT_EQ(client.DrainWakeups().datagrams, 0);
  // Only the client's side counts: a server's own socket is not an offer.
  Doorbell server;
  std::string other = UniqueKey("server-only");
  ASSERT_EQ(server.Open(other, 's', 'c'), 0);
  EXPECT_FALSE(Doorbell::ClientWaitSocketBound(other));
  client.Close();
  EXPECT_FALSE(Doorbell::ClientWaitSocketBound(key));
}

TEST(DoorbellTest, PeerWatcherWakeNamesThePeerSide) {
  // A datagram to a process's wake socket carries "<peer role><key>".
  std::string key = UniqueKey("watcher");
  Doorbell client;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  EXPECT_EQ(client.peer_wake_name(), "s" + key);
  EXPECT_EQ(client.my_wake_name(), "c" + key);
  // No process has pid 0's name, nor a negative one.
  EXPECT_EQ(client.WakePeerWatcher(0), -ECONNREFUSED);
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
