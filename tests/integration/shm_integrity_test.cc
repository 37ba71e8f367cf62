// shm_integrity: 1 GiB from a vsocket client to a vsocket server, written in
// random-sized writes (1 B..256 KiB, spread over send/write/sendmsg), arrives
// bit-identical over shared memory; both processes' VSOCKET_STATS lines count
// the shm connection and its bytes.
#include <gtest/gtest.h>

#include <string>

#include "peer_harness.h"
#include "stats_json.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kBytes = uint64_t{1} << 30;
constexpr uint64_t kSeed = 20240601;
// StreamSha256Hex(kSeed, kBytes), precomputed to keep 1 GiB of hashing out of
// the test process (the sha256 test checks the generator and the hash).
constexpr char kExpectedSha256[] =
    "9ee2b462162473d8d315fd63a5b07693ec544857f7df396da3187945a78cc27b";

TEST(ShmIntegrity, OneGiBInRandomSizedWritesArrivesIntactOverShm) {
  PairResult r = RunPair({.args = {"sink"}, .env = WithStats(Auto())},
                         {.args = {"source", std::to_string(kBytes), std::to_string(kSeed)},
                          .env = WithStats(Auto())},
                         50s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();

  EXPECT_TRUE(DataIntact(r.client, r.server, kBytes, kExpectedSha256));
  // The server closes after EOF without replying: the client reads EOF.
  EXPECT_EQ(r.client.One("received").Int("bytes"), 0);
  EXPECT_EQ(r.client.One("received").Get("end"), "eof");

  EXPECT_TRUE(TookPath(r.client, "shm", ""));
  EXPECT_TRUE(TookPath(r.server, "shm", ""));

  struct Expect {
    const PeerResult* peer;
    const char* name;
    int64_t sent, received;
  };
  for (const Expect& e : {Expect{&r.client, "client", static_cast<int64_t>(kBytes), 0},
                          Expect{&r.server, "server", 0, static_cast<int64_t>(kBytes)}}) {
    SCOPED_TRACE(e.name);
    std::optional<JsonValue> stats = FindStatsLine(e.peer->err);
    ASSERT_TRUE(stats.has_value()) << "no VSOCKET_STATS line\n" << e.peer->Describe();
    EXPECT_EQ(StatsNumber(*stats, {"pid"}), e.peer->One("conn").Int("pid"));
    EXPECT_EQ(StatsNumber(*stats, {"transports", "shm", "connections"}), 1);
    EXPECT_EQ(StatsNumber(*stats, {"transports", "shm", "bytes_sent"}), e.sent);
    EXPECT_EQ(StatsNumber(*stats, {"transports", "shm", "bytes_received"}), e.received);
    // No tcp connection: the member is absent (-1) or zero.
    EXPECT_LE(StatsNumber(*stats, {"transports", "tcp", "connections"}), 0);
  }
}

}  // namespace
}  // namespace vsocket_test
