// slow_acceptor: the server sleeps 500 ms between listen() and accept(); the
// client connects (completing from the backlog, as with kernel TCP) and
// writes 200 KiB meanwhile. Nothing is lost, for vsocket/vsocket and for
// mixed ends, and both ends agree on the transport.
#include <gtest/gtest.h>

#include <string>

#include "byte_stream.h"
#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kBytes = 200 * 1024;
constexpr uint64_t kSeed = 4242;
constexpr int kAcceptDelayMs = 500;

struct SlowCase {
  const char* name;
  bool server_plain, client_plain;
  const char *server_path, *server_reason, *client_path, *client_reason;
};

class SlowAcceptorTest : public testing::TestWithParam<SlowCase> {};

TEST_P(SlowAcceptorTest, DataWrittenBeforeAcceptIsDelivered) {
  const SlowCase& c = GetParam();
  PairResult r = RunPair(
      {.plain = c.server_plain,
       .args = {"--accept-delay-ms", std::to_string(kAcceptDelayMs), "sink"},
       .env = Auto()},
      {.plain = c.client_plain,
       .args = {"source", std::to_string(kBytes), std::to_string(kSeed)},
       .env = Auto()},
      20s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();

  EXPECT_TRUE(DataIntact(r.client, r.server, kBytes, StreamSha256Hex(kSeed, kBytes)));
  EXPECT_TRUE(TookPath(r.server, c.server_path, c.server_reason));
  EXPECT_TRUE(TookPath(r.client, c.client_path, c.client_reason));

  // The scenario really happened: the server accepted only after its delay,
  // and the client's connect() had returned (and its writes begun) before
  // that, as connect() does with kernel TCP.
  const int64_t listening = r.server.One("listening").Int("t_ns");
  const int64_t accepted = r.server.One("conn").Int("t_ns");
  const int64_t connected = r.client.One("conn").Int("t_ns");
  EXPECT_GE(accepted - listening, (kAcceptDelayMs - 50) * 1'000'000LL);
  EXPECT_LT(connected, accepted)
      << "client connect() returned " << (connected - accepted) / 1'000'000
      << " ms after the server's accept(): connect waited for the acceptor";
  RecordProperty("client_write_done_before_accept_ms",
                 std::to_string((accepted - r.client.One("sent").Int("t_ns")) / 1'000'000));
}

INSTANTIATE_TEST_SUITE_P(
    Ends, SlowAcceptorTest,
    testing::Values(
        SlowCase{"VsocketToVsocket", false, false, "shm", "", "shm", ""},
        SlowCase{"VsocketClientPlainServer", true, false, "plain", "", "tcp",
                 "peer_not_vsocket"},
        SlowCase{"PlainClientVsocketServer", false, true, "tcp", "peer_not_vsocket",
                 "plain", ""}),
    [](const testing::TestParamInfo<SlowCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace vsocket_test
