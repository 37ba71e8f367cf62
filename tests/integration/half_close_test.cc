// half_close: shutdown(SHUT_WR) delivers EOF to the peer while the other
// direction keeps working: the peer sends its reply only after it has seen
// EOF, and the half-closed end receives that reply intact. Either end may
// half-close; over shm and over kernel TCP.
#include <gtest/gtest.h>

#include <string>

#include "byte_stream.h"
#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kBytes = 8 << 20;
constexpr uint64_t kSeed = 31;
constexpr uint64_t kReplyBytes = 4 << 20;
constexpr uint64_t kReplySeed = 32;

struct HalfCloseCase {
  const char* name;
  bool client_half_closes;
  bool shm;
};

class HalfCloseTest : public testing::TestWithParam<HalfCloseCase> {};

TEST_P(HalfCloseTest, PeerGetsEofAndReplyStillArrives) {
  const HalfCloseCase& c = GetParam();
  const Env env = c.shm ? Auto() : ForceTcp();
  const PeerSpec closer{.args = {"source", std::to_string(kBytes), std::to_string(kSeed)},
                        .env = env};
  const PeerSpec replier{.args = {"sink", "--reply-bytes", std::to_string(kReplyBytes),
                                  "--reply-seed", std::to_string(kReplySeed)},
                         .env = env};
  PairResult r = c.client_half_closes ? RunPair(replier, closer, 20s)
                                      : RunPair(closer, replier, 20s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();
  const PeerResult& closer_out = c.client_half_closes ? r.client : r.server;
  const PeerResult& replier_out = c.client_half_closes ? r.server : r.client;

  EXPECT_EQ(closer_out.One("shutdown").Get("ret"), "0");
  // The replier read everything up to EOF ...
  EXPECT_TRUE(DataIntact(closer_out, replier_out, kBytes, StreamSha256Hex(kSeed, kBytes)));
  // ... and only then sent its reply, which the half-closed end received.
  EXPECT_TRUE(DataIntact(replier_out, closer_out, kReplyBytes,
                         StreamSha256Hex(kReplySeed, kReplyBytes)));
  EXPECT_LT(replier_out.One("received").Int("t_ns"), replier_out.One("sent").Int("t_ns"));

  const char* path = c.shm ? "shm" : "tcp";
  const char* reason = c.shm ? "" : "disabled_by_config";
  EXPECT_TRUE(TookPath(r.client, path, reason));
  EXPECT_TRUE(TookPath(r.server, path, reason));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HalfCloseTest,
    testing::Values(HalfCloseCase{"ClientHalfClosesShm", true, true},
                    HalfCloseCase{"ServerHalfClosesShm", false, true},
                    HalfCloseCase{"ClientHalfClosesTcp", true, false},
                    HalfCloseCase{"ServerHalfClosesTcp", false, false}),
    [](const testing::TestParamInfo<HalfCloseCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace vsocket_test
