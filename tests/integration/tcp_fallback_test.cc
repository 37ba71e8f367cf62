// tcp_fallback: when only one end uses vsocket, the connection is plain kernel
// TCP, data is intact both ways, and the vsocket end names the reason
// (peer_not_vsocket). VSOCKET_TRANSPORT=tcp on both ends forces kernel TCP
// with reason disabled_by_config. VSOCKET_LOG=info logs a reason once per
// process.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "byte_stream.h"
#include "peer_harness.h"
#include "stats_json.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kBytes = 64 << 20;   // client -> server
constexpr uint64_t kSeed = 1001;
constexpr uint64_t kReplyBytes = 4 << 20;  // server -> client, after EOF
constexpr uint64_t kReplySeed = 1002;

const std::string& ExpectedSha() {
  static const std::string sha = StreamSha256Hex(kSeed, kBytes);
  return sha;
}
const std::string& ExpectedReplySha() {
  static const std::string sha = StreamSha256Hex(kReplySeed, kReplyBytes);
  return sha;
}

PeerSpec Sink(bool plain, Env env) {
  return {.plain = plain,
          .args = {"sink", "--reply-bytes", std::to_string(kReplyBytes), "--reply-seed",
                   std::to_string(kReplySeed)},
          .env = std::move(env)};
}
PeerSpec Source(bool plain, Env env) {
  return {.plain = plain,
          .args = {"source", std::to_string(kBytes), std::to_string(kSeed)},
          .env = std::move(env)};
}

// Data intact in both directions.
void ExpectTransfers(const PairResult& r) {
  EXPECT_TRUE(DataIntact(r.client, r.server, kBytes, ExpectedSha()));
  EXPECT_TRUE(DataIntact(r.server, r.client, kReplyBytes, ExpectedReplySha()));
}

// The vsocket end's stats: one tcp connection with its bytes, the reason
// counted once, no shm connection.
void ExpectTcpStats(const PeerResult& peer, const std::string& reason, int64_t sent,
                    int64_t received) {
  std::optional<JsonValue> stats = FindStatsLine(peer.err);
  ASSERT_TRUE(stats.has_value()) << "no VSOCKET_STATS line\n" << peer.Describe();
  EXPECT_EQ(StatsNumber(*stats, {"transports", "tcp", "connections"}), 1);
  EXPECT_EQ(StatsNumber(*stats, {"transports", "tcp", "bytes_sent"}), sent);
  EXPECT_EQ(StatsNumber(*stats, {"transports", "tcp", "bytes_received"}), received);
  EXPECT_LE(StatsNumber(*stats, {"transports", "shm", "connections"}), 0);
  EXPECT_EQ(StatsNumber(*stats, {"fallback_reasons", reason}), 1);
}

TEST(TcpFallback, VsocketClientToPlainServer) {
  PairResult r = RunPair(Sink(/*plain=*/true, {}), Source(false, WithStats(Auto())), 30s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();
  ExpectTransfers(r);
  EXPECT_TRUE(TookPath(r.client, "tcp", "peer_not_vsocket"));
  EXPECT_TRUE(TookPath(r.server, "plain", ""));
  ExpectTcpStats(r.client, "peer_not_vsocket", kBytes, kReplyBytes);
}

TEST(TcpFallback, PlainClientToVsocketServer) {
  PairResult r = RunPair(Sink(false, WithStats(Auto())), Source(/*plain=*/true, {}), 30s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();
  ExpectTransfers(r);
  EXPECT_TRUE(TookPath(r.server, "tcp", "peer_not_vsocket"));
  EXPECT_TRUE(TookPath(r.client, "plain", ""));
  ExpectTcpStats(r.server, "peer_not_vsocket", kReplyBytes, kBytes);
}

TEST(TcpFallback, TransportTcpOnBothEndsIsDisabledByConfig) {
  PairResult r = RunPair(Sink(false, WithStats(ForceTcp())),
                         Source(false, WithStats(ForceTcp())), 30s);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();
  ExpectTransfers(r);
  EXPECT_TRUE(TookPath(r.client, "tcp", "disabled_by_config"));
  EXPECT_TRUE(TookPath(r.server, "tcp", "disabled_by_config"));
  {
    SCOPED_TRACE("client stats");
    ExpectTcpStats(r.client, "disabled_by_config", kBytes, kReplyBytes);
  }
  {
    SCOPED_TRACE("server stats");
    ExpectTcpStats(r.server, "disabled_by_config", kReplyBytes, kBytes);
  }
}

// Two plain clients in turn against one vsocket server with VSOCKET_LOG=info:
// both connections fall back, the reason is logged exactly once.
TEST(TcpFallback, LogsEachReasonOncePerProcess) {
  Env env = WithStats(Auto());
  env["VSOCKET_LOG"] = "info";
  Started server = StartServer({.args = {"--conns", "2", "sink"}, .env = env});
  ASSERT_TRUE(server.child) << server.error;
  for (int i = 0; i < 2; ++i) {
    Started client = StartClient(
        {.plain = true, .args = {"source", std::to_string(1 << 20), std::to_string(i)}},
        server.port);
    ASSERT_TRUE(client.child) << client.error;
    PeerResult c = Finish(*client.child, 20s);
    ASSERT_TRUE(c.ok()) << c.Describe();
  }
  PeerResult s = Finish(*server.child, 10s);
  ASSERT_TRUE(s.ok()) << s.Describe();
  EXPECT_EQ(s.All("conn").size(), 2u);
  EXPECT_TRUE(TookPath(s, "tcp", "peer_not_vsocket"));

  // Log lines naming the reason (the stats JSON line aside): exactly one,
  // carrying the documented "vsocket[<pid>]: info: " prefix (README).
  std::vector<std::string> reason_lines;
  size_t start = 0;
  for (size_t nl; (nl = s.err.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = s.err.substr(start, nl - start);
    if (!line.starts_with("{") && line.find("peer_not_vsocket") != std::string::npos) {
      reason_lines.push_back(line);
    }
  }
  ASSERT_EQ(reason_lines.size(), 1u) << s.err;
  EXPECT_TRUE(reason_lines[0].starts_with("vsocket[") &&
              reason_lines[0].find("]: info: ") != std::string::npos)
      << "log line lacks the \"vsocket[<pid>]: info: \" prefix: " << reason_lines[0];
  std::optional<JsonValue> stats = FindStatsLine(s.err);
  ASSERT_TRUE(stats.has_value()) << s.Describe();
  EXPECT_EQ(StatsNumber(*stats, {"fallback_reasons", "peer_not_vsocket"}), 2);
  EXPECT_EQ(StatsNumber(*stats, {"transports", "tcp", "connections"}), 2);
}

}  // namespace
}  // namespace vsocket_test
