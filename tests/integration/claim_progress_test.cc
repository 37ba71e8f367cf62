// A listener behind its accept queue, claiming our earlier offers in
// order, is not absent: a burst of 24 connections made at once to a server
// that accepts one every 50 ms (the last 1.2 s later) all stay on shared
// memory under a 500 ms claim timeout (fifo_bridge/claim_progress.h).
// Before, every connection accepted later than the timeout after its
// connect() moved to TCP (claim_timeout): ten thousand connections at once
// under load lost hundreds so.  Each connection carries its index both
// ways.  The server and the client are forked processes that configure
// vsocket before their first call; the gtest process never calls it.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "child_check.h"
#include "forked_pair.h"
#include "loopback.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"

namespace {

using Ctl = vsocket_test::ControlPair;
using vsocket_test_support::Loopback;

constexpr int kConnections = 24;
constexpr int kAcceptEveryMs = 50;

void Configure() {
  setenv("VSOCKET_TRANSPORT", "shm", 1);
  setenv("VSOCKET_CLAIM_TIMEOUT_MS", "500", 1);
}

void ExpectShm(int fd, int index) {
  const char* name = vsocket_transport_name(fd);
  CHECK(name && std::string(name) == "shm", "connection %d on %s (%s)", index,
        name ? name : "null", vsocket_fallback_reason(fd));
}

void SendIndex(int fd, uint32_t index) {
  CHECK(vsocket_send(fd, &index, sizeof(index), 0) == sizeof(index), "send %u", index);
}

uint32_t RecvIndex(int fd) {
  uint32_t index = 0;
  CHECK(vsocket_recv(fd, &index, sizeof(index), MSG_WAITALL) == sizeof(index), "recv");
  return index;
}

TEST(ClaimProgress, ABurstAcceptedSlowlyInOrderStaysOnSharedMemory) {
  vsocket_test::PairStatus st = vsocket_test::ForkPair(
      [](Ctl& ctl) {
        Configure();
        int port = 0;
        int lfd = vsocket_test::ListenOn(vsocket_test::VsocketApi(), Loopback(0), &port,
                                         {.backlog = 64});
        CHECK(lfd >= 0, "listen");
        ctl.Send(0, port);
        std::vector<bool> seen(kConnections);
        for (int i = 0; i < kConnections; ++i) {
          usleep(kAcceptEveryMs * 1000);
          int fd = vsocket_accept(lfd, nullptr, nullptr);
          CHECK(fd >= 0, "accept %d", i);
          ExpectShm(fd, i);
          uint32_t index = RecvIndex(fd);
          CHECK(index < kConnections && !seen[index], "index %u", index);
          seen[index] = true;
          SendIndex(fd, index + 1000);
        }
        CHECK(ctl.Recv(0) == 1, "the client's end");
      },
      [](Ctl& ctl, pid_t) {
        Configure();
        int port = static_cast<int>(ctl.Recv(1));
        std::vector<int> fds;
        for (uint32_t i = 0; i < kConnections; ++i) {
          int fd = vsocket_test::ConnectTo(vsocket_test::VsocketApi(), Loopback(port));
          CHECK(fd >= 0, "connect %u", i);
          SendIndex(fd, i);  // into the ring, before the claim
          fds.push_back(fd);
        }
        for (uint32_t i = 0; i < kConnections; ++i) {
          CHECK(RecvIndex(fds[i]) == i + 1000, "reply %u", i);
          ExpectShm(fds[i], static_cast<int>(i));
        }
        for (int fd : fds) vsocket_close(fd);
        ctl.Send(1, 1);
      },
      {.watchdog_s = 60});
  ASSERT_EQ(st.error, "");
  EXPECT_TRUE(st.server.ExitedZero()) << st.server.Describe("server");
  EXPECT_TRUE(st.client.ExitedZero()) << st.client.Describe("client");
}

}  // namespace
