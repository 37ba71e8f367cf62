// close_unread: an end that closes while data it has not read is pending
// resets the connection (kernel TCP sends RST): the other end's next recv
// fails with ECONNRESET and its next send with EPIPE. The same pair of
// programs runs over kernel TCP and over shm, and must behave the same.
#include <gtest/gtest.h>

#include <string>

#include "byte_stream.h"
#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kSent = 64 * 1024;   // all fits in the buffers / ring
constexpr uint64_t kRead = 1024;        // the closer reads only this much
constexpr int kCloseDelayMs = 300;      // then waits for the rest to arrive
constexpr uint64_t kSeed = 555;

struct Outcome {
  PairResult pair;
  Record recv, send;  // the sender's recv and send after the close
};

// Runs closer vs sender; closer_is_server picks the roles.
Outcome RunCloser(bool closer_is_server, const Env& env) {
  const PeerSpec closer{
      .args = {"close-unread", std::to_string(kRead), std::to_string(kCloseDelayMs)},
      .env = env};
  const PeerSpec sender{.args = {"send-then-recv", std::to_string(kSent), std::to_string(kSeed)},
                        .env = env};
  Outcome o;
  o.pair = closer_is_server ? RunPair(closer, sender, 20s) : RunPair(sender, closer, 20s);
  const PeerResult& s = closer_is_server ? o.pair.client : o.pair.server;
  o.recv = s.One("recv");
  o.send = s.One("send");
  return o;
}

class CloseUnreadTest : public testing::TestWithParam<bool> {};

TEST_P(CloseUnreadTest, PeerRecvFailsWithEconnresetOverTcpAndShmAlike) {
  const bool closer_is_server = GetParam();
  const Outcome tcp = RunCloser(closer_is_server, ForceTcp());
  const Outcome shm = RunCloser(closer_is_server, Auto());

  for (const Outcome* o : {&tcp, &shm}) {
    const bool is_shm = o == &shm;
    SCOPED_TRACE(is_shm ? "over shm" : "over tcp");
    ASSERT_EQ(o->pair.error, "");
    ASSERT_TRUE(o->pair.client.ok()) << o->pair.client.Describe();
    ASSERT_TRUE(o->pair.server.ok()) << o->pair.server.Describe();
    const PeerResult& closer = closer_is_server ? o->pair.server : o->pair.client;
    const PeerResult& sender = closer_is_server ? o->pair.client : o->pair.server;
    EXPECT_TRUE(TookPath(o->pair.client, is_shm ? "shm" : "tcp", is_shm ? "" : "disabled_by_config"));
    EXPECT_TRUE(TookPath(o->pair.server, is_shm ? "shm" : "tcp", is_shm ? "" : "disabled_by_config"));
    EXPECT_EQ(sender.One("sent").Int("bytes"), static_cast<int64_t>(kSent)) << sender.Describe();
    EXPECT_EQ(closer.One("closing_unread").Int("read"), static_cast<int64_t>(kRead));

    EXPECT_EQ(o->recv.Get("ret"), "-1") << sender.Describe();
    EXPECT_EQ(o->recv.Get("errno"), "ECONNRESET") << sender.Describe();
    EXPECT_EQ(o->send.Get("ret"), "-1") << sender.Describe();
    EXPECT_EQ(o->send.Get("errno"), "EPIPE") << sender.Describe();
  }
  // Same program, same observable behaviour on both transports.
  EXPECT_EQ(shm.recv.fields, tcp.recv.fields);
  EXPECT_EQ(shm.send.fields, tcp.send.fields);
}

INSTANTIATE_TEST_SUITE_P(Closer, CloseUnreadTest, testing::Values(true, false),
                         [](const testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "ServerClosesUnread" : "ClientClosesUnread";
                         });

}  // namespace
}  // namespace vsocket_test
