// banner: the server speaks first (a banner written right after accept,
// before the client sent anything), then echoes. The client must receive the
// banner byte-exact and an echo round trip must work afterwards, whether the
// ends are vsocket/vsocket, vsocket server/plain client, or plain
// server/vsocket client.
#include <gtest/gtest.h>

#include <string>

#include "peer_harness.h"
#include "sha256.h"

namespace vsocket_test {
namespace {

// Must match kBanner in testpeer_modes.cc.
constexpr char kBanner[] = "220 vsocket-testpeer ready; server speaks first\r\n";
constexpr int kRoundtrips = 50;

struct BannerCase {
  const char* name;
  bool server_plain, client_plain;
  const char *server_path, *server_reason, *client_path, *client_reason;
};

class BannerTest : public testing::TestWithParam<BannerCase> {};

TEST_P(BannerTest, ClientReceivesBannerIntactThenEchoWorks) {
  const BannerCase& c = GetParam();
  PairResult r = RunPair(
      {.plain = c.server_plain, .args = {"banner"}, .env = Auto()},
      {.plain = c.client_plain,
       .args = {"roundtrip", std::to_string(kRoundtrips), "77", "--expect-banner"},
       .env = Auto()},
      20s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();

  const Record banner = r.client.One("banner");
  EXPECT_EQ(banner.Get("ok"), "1");
  EXPECT_EQ(banner.Int("bytes"), static_cast<int64_t>(sizeof(kBanner) - 1));
  EXPECT_EQ(banner.Get("sha256"), Sha256::HexOf(kBanner, sizeof(kBanner) - 1));
  EXPECT_EQ(r.server.One("banner_sent").Int("bytes"),
            static_cast<int64_t>(sizeof(kBanner) - 1));

  const Record trip = r.client.One("roundtrip");
  EXPECT_EQ(trip.Int("count"), kRoundtrips);
  EXPECT_EQ(trip.Int("mismatches"), 0);
  EXPECT_GT(trip.Int("bytes"), 0);
  // Everything the client sent came back, and nothing more.
  EXPECT_EQ(r.server.One("echoed").Int("bytes"), trip.Int("bytes"));
  EXPECT_EQ(r.server.One("echoed").Get("end"), "eof");
  EXPECT_EQ(r.client.One("received").Int("bytes"), 0);

  EXPECT_TRUE(TookPath(r.server, c.server_path, c.server_reason));
  EXPECT_TRUE(TookPath(r.client, c.client_path, c.client_reason));
}

INSTANTIATE_TEST_SUITE_P(
    Ends, BannerTest,
    testing::Values(
        BannerCase{"VsocketServerVsocketClient", false, false, "shm", "", "shm", ""},
        BannerCase{"VsocketServerPlainClient", false, true, "tcp", "peer_not_vsocket",
                   "plain", ""},
        BannerCase{"PlainServerVsocketClient", true, false, "plain", "", "tcp",
                   "peer_not_vsocket"}),
    [](const testing::TestParamInfo<BannerCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace vsocket_test
